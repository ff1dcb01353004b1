"""Every pending decision of every game times out into the rules' own default (NP-D1, NC-D02,
GC-D02/D05/D06, GR-D03/D06): a person who never answers never stalls a match.

Random games of each engine; at random points every seat asked is timed out at once, one after
another, as the bots' clocks do when a shared deadline runs out (services/bots/handlers.run_clock:
`engine.timeout_command` for each seat still asked). Each default must

- exist and be accepted by `decide`;
- be the default the rules' Decisions section names for that decision, computed here from the
  rule text and the seat's legal answers (`legal_commands`), not from the engine's own default;
- come with the rule's timeout (the default configuration);
- act for that seat only: the other seats asked in the same simultaneous decision stay asked;
- depend on nothing the seat cannot see: the same default on a world sampled from its view.

The soak profile (tests/profile.py) plays many more games."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from famiglia.engine import MatchConfig, Rng, fold
from famiglia.engine.registry import default_registry
from tests.profile import examples

# -- the rules' defaults, from their Decisions sections --------------------------------------------------------


def _grifters(state: Any, seat: int, label: str) -> Any:
    """GR-D03, GR-D05, GR-D06."""
    from famiglia.rules.grifters import commands as C
    from famiglia.rules.grifters import state as S
    from famiglia.rules.grifters.data import CARD_ORDER, EFFECT_OF, FALL_GUY

    engine = default_registry().get("grifters")
    hand_order = sorted(state.players[seat].hand, key=CARD_ORDER.__getitem__)
    if label == "play":   # GR-D06: a caper with the first card in hand order, every follow-up by default
        return C.pull_caper(hand_order[0], use_defaults=True)
    legal = list(engine.legal_commands(state, seat, limit=100_000))
    left = [(seat + k) % state.seats for k in range(1, state.seats)]   # seat order from the active's left

    def first(key: Callable[[Any], Any]) -> Any:
        return min(legal, key=key)

    if label == S.OPPONENT:   # the largest Stash; on a tie the first from the left
        return first(lambda c: (-state.players[c.rob_opponent.opponent].stash, left.index(c.rob_opponent.opponent)))
    if label == S.KEEP:       # the first card drawn
        return C.answer_command(label, state.caper.drawn[0])
    if label in (S.ABDUCT, S.KIDNAP, S.HIT):   # the first in Hideout order (GR-D05)
        def hideout(c: Any) -> tuple[int, int, int]:
            body = getattr(c, c.WhichOneof("kind"))
            nights = state.players[body.opponent].nights
            night = next(i for i, group in enumerate(nights) if body.card in group)
            return left.index(body.opponent), night, CARD_ORDER[body.card]
        return first(hideout)
    if label in (S.JOB_SWAP, S.SECOND):   # decline
        return C.answer_command(label, None)
    if label == S.NIGHT:      # the lowest-numbered Night space holding cards
        return first(lambda c: c.return_night.night)
    if label == S.PARTNER:    # the first in hand order
        return first(lambda c: CARD_ORDER[c.choose_partner.card])
    if label == S.COPY:       # the first non-Fall Guy in hand order
        return first(lambda c: (EFFECT_OF[c.copy_caper.card] == FALL_GUY, CARD_ORDER[c.copy_caper.card]))
    raise AssertionError(f"GR-D03 names no default for {label!r}")


def _goodcritters(state: Any, seat: int, label: str) -> Any:
    """GC-D02, GC-D05, GC-D06."""
    from famiglia.rules.goodcritters import commands as C

    if label == "assign_loot":   # table order, one card at a time from the Boss's left, the Boss last
        n = state.seats
        return C.assign_loot([(card, (state.boss + 1 + i) % n) for i, card in enumerate(state.table)])
    if label == "threat_turn":   # the turn ends with what was done
        return C.end_turn()
    if label == "choose_action":  # the chosen card stands; no card: Vote Yes (the configured default card)
        return C.commit() if state.cards[seat] else C.choose_action_card(state.config.timeout_action, commit=True)
    raise AssertionError(f"GC-D01 names no decision {label!r}")


def _nostra_city(state: Any, seat: int, label: str) -> Any:
    """NC-D04..NC-D12."""
    from famiglia.nostra_city.v1 import nostra_city_pb2 as pb
    from famiglia.rules.nostra_city.data import NOTE_VALUE, UNDERBOSS, VENDETTA_BY_ID

    n = state.seats
    choice = state.choice
    if label in ("business", "meeting", "trial"):   # NC-D04, D07, D08, D12: end the turn
        return pb.Command(end_turn=pb.EndTurn())
    clockwise = [(choice.seat + k) % n for k in range(1, n)]
    if label == "distribute":   # NC-D05: no gift; clockwise from the left, Notes in draw order up to each share
        notes, gifts = list(choice.notes), []
        for p in clockwise:
            take, notes = notes[:choice.shares[p]], notes[choice.shares[p]:]
            if take:
                gifts.append(pb.Gift(seat=p, notes=take))
        return pb.Command(distribute_notes=pb.DistributeNotes(gifts=gifts))
    if label == "keep":         # NC-D09: the highest Notes; among equals, the earliest placed
        ranked = sorted(range(len(choice.notes)), key=lambda i: (-NOTE_VALUE[choice.notes[i]], i))
        return pb.Command(keep_notes=pb.KeepNotes(notes=[choice.notes[i] for i in ranked[:choice.keep]]))
    if label == "consigliere":  # NC-D10: the first other player clockwise from the Underboss
        return pb.Command(assign_title=pb.AssignTitle(title=label, seat=clockwise[0]))
    if label == "primo_capo":   # NC-D11: the first clockwise who is neither Consigliere nor Underboss
        to = next(p for p in clockwise if p != state.holder(UNDERBOSS))
        return pb.Command(assign_title=pb.AssignTitle(title=label, seat=to))
    if label == "rage":         # NC-D06: the first other player clockwise on whom it has an effect
        from famiglia.rules.nostra_city.queries import free_wiseguys

        engine = default_registry().get("nostra_city")
        legal = [c.play_rage for c in engine.legal_commands(state, seat, limit=100_000)]
        effect = VENDETTA_BY_ID[choice.card].effect
        for t in clockwise:
            options = [o for o in legal if o.target == t]
            if effect == "beating" and free_wiseguys(state.players[t]) and options:
                return pb.Command(play_rage=min(options, key=lambda o: o.wiseguy))   # the lowest card id
            if effect == "smash" and state.players[t].bank and options:
                return pb.Command(play_rage=options[0])
        return pb.Command(play_rage=next(o for t in clockwise for o in legal if o.target == t))
    raise AssertionError(f"NC-D01 names no decision {label!r}")


def _nothing_personal(state: Any, seat: int, label: str) -> Any:
    """NP-D3..NP-D14."""
    from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb
    from famiglia.rules.nothing_personal.state import A_SLOTS

    positions = state.board[:9]   # index i: position i + 1
    highest = next(g for g in reversed(positions) if g)
    if label == "setup":          # NP-D3: the gangster at the highest-numbered position
        return pb.Command(place_setup_marker=pb.PlaceSetupMarker(gangster=highest))
    if label == "invite":         # NP-D12: the gangster at the highest-numbered occupied position
        return pb.Command(place_invited_marker=pb.PlaceInvitedMarker(gangster=highest))
    if label in ("commission", "window", "action"):   # NP-D4, NP-D5, NP-D6, NP-D10: pass
        return pb.Command(**{"pass": pb.Pass()})
    if label == "blackmail":      # NP-D11: refuse
        return pb.Command(grant_blackmail=pb.GrantBlackmail(accept=False))
    if label == "ruling":         # NP-D9: the first tied seat in ring order (the ring holder first)
        ring = [(state.ring + k) % state.n for k in range(state.n)]
        return pb.Command(rule_on_tie=pb.RuleOnTie(seat=next(p for p in ring if p in state.ruling.seats)))
    if label == "vacancy":        # NP-D14: the candidate at the highest-numbered position, else the lowest slot
        cands = state.vacancy.candidates
        on_pos = [g for g in positions if g in cands]
        gid = on_pos[-1] if on_pos else next(state.board[i] for i in A_SLOTS if state.board[i] in cands)
        return pb.Command(fill_vacancy=pb.FillVacancy(gangster=gid))
    if label == "buy":            # NP-D13: 0 cards
        return pb.Command(buy=pb.Buy(count=0))
    raise AssertionError(f"NP-D1 names no decision {label!r}")


RULE_DEFAULT: dict[str, Callable[[Any, int, str], Any]] = {
    "grifters": _grifters, "goodcritters": _goodcritters, "nostra_city": _nostra_city,
    "nothing_personal": _nothing_personal,
}

# The rules' timeouts in seconds, by the engine's `pending` label (default configuration).
_NC_TURN = {"business": 120.0, "meeting": 120.0, "trial": 120.0}                      # NC-D02
_GR_CHOICES = ("opponent", "keep", "abduct", "kidnap", "hit", "job_swap", "night", "partner", "copy",
               "second_caper")
RULE_TIMEOUT: dict[str, Callable[[Any, str], float]] = {
    "grifters": lambda s, label: 90.0 if label == "play" else 30.0 if label in _GR_CHOICES else -1,   # GR-D06
    "goodcritters": lambda s, label: {                                                                # GC-K01
        "assign_loot": 90.0, "threat_turn": 30.0,
        "choose_action": 60.0 if s.config.turn_mode else 120.0}.get(label, -1),
    "nostra_city": lambda s, label: _NC_TURN.get(label, 45.0 if label in (                             # NC-D02
        "distribute", "keep", "consigliere", "primo_capo", "rage") else -1),
    "nothing_personal": lambda s, label: {                                                            # NP-D3..D14
        "setup": 30.0, "commission": 60.0, "ruling": 30.0, "action": 60.0, "blackmail": 30.0,
        "invite": 30.0, "buy": 30.0, "vacancy": 30.0,
        "window": 20.0 if s.window is not None and s.window.kind == "card" else 15.0}.get(label, -1),
}

TABLES: dict[str, tuple[tuple[int, ...], tuple[dict[str, str], ...]]] = {
    "grifters": ((2, 3, 4), ({}, {"fall_guy_may_copy_fall_guy": "true"})),
    "goodcritters": ((4, 5, 6, 8), ({}, {"step3_mode": "turns"}, {"payoff.enabled": "true"})),
    "nostra_city": ((3, 4, 5), ({},)),
    "nothing_personal": ((3, 4, 5), ({},)),
}


def _canonical(command: Any) -> bytes:
    return command.SerializeToString(deterministic=True)


def _time_out_everyone(engine: Any, game: str, state: Any, seed: int, sample_world: bool) -> set[str]:
    """Every seat asked now times out, one after another; returns the labels met."""
    asked = [p.seat for p in engine.pending(state)]
    labels = set()
    for k, seat in enumerate(asked):
        rows = [p for p in engine.pending(state) if p.seat == seat]
        if not rows:   # an earlier default closed the decision
            break
        (row,) = rows
        labels.add(row.label)
        if not (row.private and row.timeout_seconds < 1):   # NP-D7's auto-pass clock runs out at once
            assert row.timeout_seconds == RULE_TIMEOUT[game](state, row.label), row
        command = engine.timeout_command(state, seat)
        assert command is not None, f"{game}: no default for {row.label!r}\n{engine.render_state(state)}"
        expected = RULE_DEFAULT[game](state, seat, row.label)
        assert _canonical(command) == _canonical(expected), (
            f"{game} {row.label!r}, seat {seat}: the default is\n{command}\nthe rules say\n{expected}\n"
            f"{engine.render_state(state)}")
        if sample_world and engine.determinize is not None:
            world = engine.determinize(engine.view(state, seat), seat, Rng(seed + k))
            again = engine.timeout_command(world, seat)
            assert again is not None and _canonical(again) == _canonical(command), "the default reads hidden facts"
        state = fold(engine, engine.decide(state, seat, command, Rng(seed * 31 + k)), state)
        others = set(asked[k + 1:])
        still = {p.seat for p in engine.pending(state)}
        # for that seat only: the rest of a simultaneous decision is still asked of the others
        assert not others or others <= still or not (still & others), (game, row.label, seat, others, still)
    return labels


def _play(game: str, n: int) -> set[str]:
    engine = default_registry().get(game)
    seats_of, options_of = TABLES[game]
    labels: set[str] = set()
    for i in range(n):
        seed = 1000 + i
        seats = seats_of[i % len(seats_of)]
        options = options_of[(i // len(seats_of)) % len(options_of)]
        pick, dice = random.Random(seed), Rng(seed)
        state = fold(engine, engine.setup(MatchConfig(seats, options), seed))
        for _ in range(engine.info.max_steps):
            pendings = engine.pending(state)
            if not pendings:
                break
            if pick.random() < 0.25:
                labels |= _time_out_everyone(engine, game, state, seed, sample_world=pick.random() < 0.2)
            seat = pick.choice(pendings).seat
            command = pick.choice(engine.legal_commands(state, seat, limit=64))
            state = fold(engine, engine.decide(state, seat, command, dice), state)
    return labels


@pytest.mark.parametrize("game, quick, soak", [
    ("grifters", 10, 300), ("goodcritters", 10, 300), ("nostra_city", 4, 120), ("nothing_personal", 4, 100),
])
def test_every_pending_seat_times_out_into_the_rules_default(game: str, quick: int, soak: int) -> None:
    """NP-D1, NC-D02, GC-D02/D05/D06, GR-D03/D06: at random points of random games every seat
    asked is timed out; each gets the rules' default, accepted, for itself alone."""
    labels = _play(game, examples(quick=quick, soak=soak))
    assert labels


def test_gr_d03_a_fall_guy_that_may_copy_a_fall_guy_still_defaults_to_the_first_non_fall_guy() -> None:
    """GR-D03 (with GR-K20's `fall_guy_may_copy_fall_guy`): the copy choice's default is the
    first non-Fall Guy in hand order, though the variant makes another Fall Guy a legal answer."""
    from famiglia.rules.grifters import ENGINE
    from famiglia.rules.grifters.state import COPY
    from tests.unit.grifters._helpers import FALL, act, caper, sp, table

    s = table(2, hands={0: [FALL, sp(13, 2), sp(15, 1)]}, options={"fall_guy_may_copy_fall_guy": "true"})
    s, _ = act(s, caper(FALL))
    assert s.choice == COPY and len(ENGINE.legal_commands(s, 0)) == 2
    assert ENGINE.timeout_command(s, 0).copy_caper.card == sp(15, 1)
    # with only Fall Guys left to copy, the first legal one
    s = table(2, hands={0: [FALL, sp(13, 2), sp(13, 3)]}, options={"fall_guy_may_copy_fall_guy": "true"})
    s, _ = act(s, caper(FALL))
    assert ENGINE.timeout_command(s, 0).copy_caper.card == sp(13, 2)
