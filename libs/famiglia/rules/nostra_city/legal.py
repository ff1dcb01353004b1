"""legal_commands(state, seat, limit): every legal command, or for compound choices
(distributions, bids, Corruptions) a bounded representative sample.

Complete generators, all accepted by `decide`:
- CashIn: every Free Wiseguy x legal (source Turf, declared type, W05 option). Sample:
  the Earners and W18 plus one other Wiseguy.
- DistributeNotes: every split of the drawn Notes among the other seats with at most
  s(p) Notes each (s(p) - 1 for the First Player gift's receiver), plus optionally the
  gift to a seat with a share. Sample: fair, keep-all, cheat-one, serve-one, gifts.
- PlaceBid: every Free Wiseguy x unused Location on a filled space x every non-empty
  subset of the Bank (at least 2 Notes under I5). Sample: the Baldini plus one other
  Wiseguy, per Location the lowest Note, the highest Note, the two lowest, the whole Bank.
- Corrupt: every Free Wiseguy x every Bank Note (pairs with W11), W12 and W13 options.
  Sample: the Fixers plus one other Wiseguy, one Note of each (value, mark) kind.
"""

from __future__ import annotations

from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

from .data import NOTE_MARK, NOTE_VALUE, POWER_HOLDER, VENDETTA_BY_ID, WISEGUY_BY_ID
from .decide.business import distribution_samples
from .decide.meeting import title_candidates
from .decide.turns import rage_options
from .effects import REVENGE_TARGETS
from .queries import can_bid, can_corrupt, cash_in_options, free_wiseguys, min_bid_notes
from .state import Phase, State

_END = pb.Command(end_turn=pb.EndTurn())


def legal_commands(state: State, seat: int, limit: int | None = None) -> list[pb.Command]:
    cap = limit if limit is not None else 10_000
    if state.phase is Phase.OVER or cap <= 0:
        return []
    choice = state.choice
    if choice is not None:
        if choice.seat != seat:
            return []
        return _bounded(_choice_commands(state, cap), cap)
    if seat != state.turn_seat or state.draws:
        return []
    out: list[pb.Command] = []
    if not state.turn_acted:
        out.extend(_revenge(state, seat))
    if state.phase is Phase.BUSINESS:
        out.extend(_cash_ins(state, seat))
    elif state.phase is Phase.MEETING:
        out.extend(_bids(state, seat))
    elif state.phase is Phase.TRIAL:
        out.extend(_corruptions(state, seat))
    return [_END, *_bounded(out, cap - 1)]


def _bounded(commands: list[pb.Command], cap: int) -> list[pb.Command]:
    """An evenly spread, deterministic sample of at most `cap` commands."""
    if len(commands) <= cap:
        return commands
    if cap <= 0:
        return []
    step = len(commands) / cap
    return [commands[int(i * step)] for i in range(cap)]


def _choice_commands(state: State, cap: int) -> list[pb.Command]:
    choice = state.choice
    assert choice is not None
    if choice.kind == "distribute":
        return distribution_samples(state, cap)
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


def _cash_ins(state: State, seat: int) -> list[pb.Command]:
    free = _representatives(free_wiseguys(state.players[seat]), "cash_in")
    out = []
    for turf, declared, power in cash_in_options(state, seat):
        for w in ([POWER_HOLDER["any_source"]] if power else free):
            out.append(pb.Command(cash_in=pb.CashIn(wiseguy=w, turf=turf, declared=declared, use_power=power)))
    return out


def _representatives(free: list[str], action: str) -> list[str]:
    """Wiseguys whose powers do not touch `action` act alike: the first of them stands for all."""
    plain = [w for w in free if WISEGUY_BY_ID[w].action != action]
    return [w for w in free if WISEGUY_BY_ID[w].action == action] + plain[:1]


def _bids(state: State, seat: int) -> list[pb.Command]:
    if not can_bid(state, seat):
        return []
    p = state.players[seat]
    need = min_bid_notes(state)
    by_value = sorted(p.bank, key=lambda n: (NOTE_VALUE[n], n))
    sets: list[list[int]] = []
    for notes in (by_value[:1], by_value[-1:], by_value[:2], by_value):
        if len(notes) >= need and notes not in sets:
            sets.append(notes)
    out = []
    for w in _representatives(free_wiseguys(p), "auction"):
        for loc in p.locations:
            if state.street[loc - 1]:
                for notes in sets:
                    out.append(pb.Command(place_bid=pb.PlaceBid(wiseguy=w, location=loc, notes=notes)))
    return out


def _corruptions(state: State, seat: int) -> list[pb.Command]:
    if not can_corrupt(state, seat):
        return []
    p = state.players[seat]
    kinds: dict[tuple[int, str], int] = {}
    for n in p.bank:
        kinds.setdefault((NOTE_VALUE[n], NOTE_MARK[n]), n)
    singles = sorted(kinds.values())
    out = []
    for w in _representatives(free_wiseguys(p), "corruption"):
        effect = WISEGUY_BY_ID[w].effect
        for n in singles:
            out.append(pb.Command(corrupt=pb.Corrupt(wiseguy=w, notes=[n])))
        if effect == "two_notes" and len(p.bank) >= 2:
            out.append(pb.Command(corrupt=pb.Corrupt(wiseguy=w, notes=list(p.bank[:2]))))
        if effect == "deck_corruption":
            out.append(pb.Command(corrupt=pb.Corrupt(wiseguy=w, from_deck=True)))
        if effect == "token_move" and not state.w13_spent:
            out.append(pb.Command(corrupt=pb.Corrupt(wiseguy=w, move_token=True)))
    return out
