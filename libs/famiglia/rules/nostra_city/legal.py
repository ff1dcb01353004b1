"""legal_commands(state, seat, limit, rng=None): every legal command; for a compound choice
(cash-ins, bids, Corruptions, distributions) a sample of it, and then a `Sampled` whenever
the sample leaves a legal member out.

Without an rng, the representatives below, the same every time (what bots choose among).
With one, each compound choice is drawn from all of its legal members (`sampler`), half of
its room still going to representatives, and whatever is cut at the limit is cut at random,
so every legal command can come up. Complete generators, all accepted by `decide`:
- CashIn: every Free Wiseguy x legal (source Turf, declared type, W05 option).
  Representatives: the Earners and W18 plus one other Wiseguy (the others act alike here).
- DistributeNotes: every split of the drawn Notes among the other seats with at most
  s(p) Notes each (s(p) - 1 for the First Player gift's receiver), plus optionally the
  gift to a seat with a share. Representatives: fair (in draw order, and keeping the Innocent
  or the Guilty Notes drawn: NC-V05), keep-all, cheat-one, serve-one, gifts.
- PlaceBid: every Free Wiseguy x unused Location on a filled space x every non-empty
  subset of the Bank (at least 2 Notes under I5), in value order with Notes of one value in
  every order: the timeout of the keep choice keeps the earliest placed of equal Notes
  (NC-D09). Representatives: the Baldini plus one other Wiseguy, per Location one Note of
  each (value, mark) kind, the two lowest, the whole Bank, and the whole Bank but its
  Innocent or its Guilty Notes (equal values in id order): what a bid costs differs by the
  marks it gives up (NC-V05).
- Corrupt: every Free Wiseguy x every Bank Note (pairs with W11), W12 and W13 options.
  Representatives: the Fixers plus one other Wiseguy, one Note of each (value, mark) kind.
- KeepNotes, AssignTitle, PlayRage, PlayVendetta: listed whole (W08's pairs included).
The other orders `decide` takes (a Corruption pair's, gifts' and their Notes', a KeepNotes')
change nothing, so each is listed and drawn in one form (`sampler`).
"""

from __future__ import annotations

from famiglia.engine import Draws, Sampled, draw_in_order
from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

from .data import NOTE_MARK, NOTE_VALUE, POWER_HOLDER, VENDETTA_BY_ID, WISEGUY_BY_ID
from .decide.business import distribution_samples
from .decide.meeting import title_candidates
from .decide.turns import rage_options
from .effects import REVENGE_TARGETS
from .queries import can_bid, can_corrupt, cash_in_options, free_wiseguys, min_bid_notes
from .sampler import Members, bids, cash_ins, corruptions, distributions, sample
from .state import Phase, State

_END = pb.Command(end_turn=pb.EndTurn())


def legal_commands(state: State, seat: int, limit: int | None = None, *,
                   rng: Draws | None = None) -> list[pb.Command]:
    cap = limit if limit is not None else 10_000
    if state.phase is Phase.OVER or cap <= 0:
        return []
    choice = state.choice
    if choice is not None:
        if choice.seat != seat:
            return []
        if choice.kind == "distribute":
            splits, whole = distribution_samples(state, 10_000), distributions(state)
            listed = splits[:cap] if rng is None else sample(splits, whole, cap, rng)
            return _flagged(listed, splits, whole)
        listed = _choice_commands(state)
        return _bounded(listed, cap) if rng is None else draw_in_order(listed, cap, rng)
    if seat != state.turn_seat or state.draws:
        return []
    small = _revenge(state, seat) if not state.turn_acted else []
    compound = _COMPOUND.get(state.phase)
    fixed, members = compound(state, seat) if compound else ([], None)
    if rng is None:
        return _flagged([_END, *_bounded(small + fixed, cap - 1)], fixed, members)
    # the compound choice keeps at least half of the room; the small ones share the rest
    room = cap - 1
    drawn = sample(fixed, members, max(room - len(small), (room + 1) // 2), rng) if members else []
    return _flagged([_END, *draw_in_order(small, room - len(drawn), rng), *drawn], fixed, members)


def _flagged(listed: list[pb.Command], fixed: list[pb.Command], members: Members | None) -> list[pb.Command]:
    """A `Sampled` whenever the representatives leave a legal member of the compound choice
    out, with or without an rng: a client then knows to compose the others itself."""
    return Sampled(listed) if members is not None and members.size > len(fixed) else listed


def _bounded(commands: list[pb.Command], cap: int) -> list[pb.Command]:
    """An evenly spread, deterministic sample of at most `cap` commands."""
    if len(commands) <= cap:
        return commands
    if cap <= 0:
        return []
    step = len(commands) / cap
    return [commands[int(i * step)] for i in range(cap)]


def _choice_commands(state: State) -> list[pb.Command]:
    """Every answer to a small choice inside a turn (NC-D06, NC-D09..D11)."""
    choice = state.choice
    assert choice is not None
    if choice.kind == "keep":
        notes = choice.notes
        out = [pb.Command(keep_notes=pb.KeepNotes(notes=[n])) for n in notes]
        if choice.keep >= 2:
            out += [pb.Command(keep_notes=pb.KeepNotes(notes=sorted([a, b])))
                    for i, a in enumerate(notes) for b in notes[i + 1:]]
        return out
    if choice.kind in ("consigliere", "primo_capo"):
        return [pb.Command(assign_title=pb.AssignTitle(title=choice.kind, seat=p))
                for p in title_candidates(state)]
    return [pb.Command(play_rage=r) for r in rage_options(state)]


def _revenge(state: State, seat: int) -> list[pb.Command]:
    out = []
    seen: set[str] = set()
    for card in state.players[seat].hand:
        v = VENDETTA_BY_ID[card]
        if v.kind != "revenge" or v.effect in seen:
            continue
        seen.add(v.effect)
        for target, wiseguy, turf in REVENGE_TARGETS[v.effect](state, seat):
            out.append(pb.Command(play_vendetta=pb.PlayVendetta(card=card, target=target, wiseguy=wiseguy,
                                                               turf=turf)))
    return out


def _cash_ins(state: State, seat: int) -> tuple[list[pb.Command], Members | None]:
    free = free_wiseguys(state.players[seat])
    options = cash_in_options(state, seat)
    reps = _representatives(free, "cash_in")
    out = []
    for turf, declared, power in options:
        for w in ([POWER_HOLDER["any_source"]] if power else reps):
            out.append(pb.Command(cash_in=pb.CashIn(wiseguy=w, turf=turf, declared=declared, use_power=power)))
    return out, cash_ins(free, options)


def _representatives(free: list[str], action: str) -> list[str]:
    """Wiseguys whose powers do not touch `action` act alike: the first of them stands for all."""
    plain = [w for w in free if WISEGUY_BY_ID[w].action != action]
    return [w for w in free if WISEGUY_BY_ID[w].action == action] + plain[:1]


def _bids(state: State, seat: int) -> tuple[list[pb.Command], Members | None]:
    if not can_bid(state, seat):
        return [], None
    p = state.players[seat]
    free = free_wiseguys(p)
    need = min_bid_notes(state)
    by_value = sorted(p.bank, key=lambda n: (NOTE_VALUE[n], n))
    locations = [loc for loc in p.locations if state.street[loc - 1]]
    sets: list[list[int]] = []
    for notes in _bid_sets(by_value):
        if len(notes) >= need and notes not in sets:
            sets.append(notes)
    out = []
    for w in _representatives(free, "auction"):
        for loc in locations:
            for notes in sets:
                # Set in place: a third cheaper than building the PlaceBid and copying it in,
                # and a Meeting lists some sixty bids at every step of a random game.
                command = pb.Command()
                bid = command.place_bid
                bid.wiseguy, bid.location = w, loc
                bid.notes.extend(notes)
                out.append(command)
    return out, bids(free, locations, by_value, need)


def _bid_sets(by_value: list[int]) -> list[list[int]]:
    """Bids that differ in what they cost the bidder: its value and the marks it gives up
    (NC-V05). One Note of each (value, mark) kind, the two lowest, the whole Bank, and the
    whole Bank but for its Innocent or its Guilty Notes."""
    but = [[n for n in by_value if NOTE_MARK[n] != mark] for mark in ("I", "G")]
    return [[n] for n in _one_of_each_kind(by_value)] + [by_value[:2], by_value, *but]


def _one_of_each_kind(notes: list[int] | tuple[int, ...]) -> list[int]:
    """The first Note of each (value, mark) kind, in the order given: Notes of one kind act alike."""
    kinds: dict[tuple[int, str], int] = {}
    for n in notes:
        kinds.setdefault((NOTE_VALUE[n], NOTE_MARK[n]), n)
    return list(kinds.values())


def _corruptions(state: State, seat: int) -> tuple[list[pb.Command], Members | None]:
    if not can_corrupt(state, seat):
        return [], None
    p = state.players[seat]
    free = free_wiseguys(p)
    singles = sorted(_one_of_each_kind(p.bank))
    out = []
    for w in _representatives(free, "corruption"):
        effect = WISEGUY_BY_ID[w].effect
        for n in singles:
            out.append(pb.Command(corrupt=pb.Corrupt(wiseguy=w, notes=[n])))
        if effect == "two_notes" and len(p.bank) >= 2:
            out.append(pb.Command(corrupt=pb.Corrupt(wiseguy=w, notes=list(p.bank[:2]))))
        if effect == "deck_corruption":
            out.append(pb.Command(corrupt=pb.Corrupt(wiseguy=w, from_deck=True)))
        if effect == "token_move" and not state.w13_spent:
            out.append(pb.Command(corrupt=pb.Corrupt(wiseguy=w, move_token=True)))
    return out, corruptions(free, p.bank, state.w13_spent)


_COMPOUND = {Phase.BUSINESS: _cash_ins, Phase.MEETING: _bids, Phase.TRIAL: _corruptions}
"""Each turn phase's compound choice: its representatives and its whole (`sampler`)."""
