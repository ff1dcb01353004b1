"""THE BUSINESS (NC-B01..B16): Cash-in, its draw and its distribution."""

from __future__ import annotations

from famiglia.engine import Rng
from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

from ..data import ATLANTIC_CITY, NOTE_MARK, TURF_BY_ID, WISEGUY_BY_ID
from ..queries import acting_power, blocked, cashin_key, is_racket, shares
from ..state import Choice, Phase, State
from .common import Emitter, cheat_draws, draw_notes, refuse


def cash_in(em: Emitter, seat: int, cmd: pb.CashIn, rng: Rng) -> None:
    """NC-B01: make a Free Wiseguy and a Free Turf Busy, declare, count, draw."""
    s = em.state
    if s.phase is not Phase.BUSINESS:
        raise refuse("NC-B01", "Cash-in is the Business action")
    p = s.players[seat]
    if cmd.wiseguy not in p.wiseguys or cmd.wiseguy in p.busy:
        raise refuse("NC-R05", "a cash-in needs a Free Wiseguy of your own")
    if cmd.turf not in p.turfs:
        raise refuse("NC-B01", "the source Turf must be in your Territory")
    if cmd.turf == ATLANTIC_CITY:
        raise refuse("NC-B02", "Atlantic City is never a source Turf")
    if cmd.use_power:
        if WISEGUY_BY_ID[cmd.wiseguy].effect != "any_source":
            raise refuse("NC-W105", "only W05 names a source without making it Busy")
    elif cmd.turf in p.busy:
        raise refuse("NC-B02", "a Busy Turf cannot be a source Turf")
    turf = TURF_BY_ID[cmd.turf]
    if cmd.declared not in turf.colours and cmd.declared not in turf.icons:
        code = "NC-B04" if not turf.icons else "NC-B01"
        raise refuse(code, f"{cmd.declared!r} is not printed on {turf.name}")
    if cashin_key(cmd.declared) in p.cashins:
        raise refuse("NC-B14", "one Racket cash-in and one Traffic cash-in per icon per Business")
    if blocked(s, cmd.declared):
        raise refuse("NC-B16", f"an Investigation on the Street forbids {cmd.declared}")
    share = shares(s, cmd.declared)
    total = sum(share)
    em(cashed_in=pb.CashedIn(seat=seat, wiseguy=cmd.wiseguy, turf=cmd.turf, declared=cmd.declared,
                             shares=share, total=total, use_power=cmd.use_power))
    _, raided = draw_notes(em, seat, total, rng)
    w = WISEGUY_BY_ID[cmd.wiseguy]
    if not raided and w.effect == "bonus_note":  # NC-W101..W104
        if w.param == cmd.declared or (w.param == "racket" and is_racket(cmd.declared)):
            draw_notes(em, seat, 1, rng, bonus=True)
    if sum(share) == share[seat]:  # NC-X19: nobody else has a share
        assert em.state.choice is not None
        notes = em.state.choice.notes
        em(notes_banked=pb.NotesBanked(seat=seat, notes=notes, count=len(notes)))


def may_give_first_player(state: State, seat: int) -> bool:
    """NC-B12, NC-B13, NC-X14."""
    return state.first_player == seat and not state.first_player_moved


def distribute_notes(em: Emitter, seat: int, cmd: pb.DistributeNotes, rng: Rng) -> None:
    """NC-B08..B12, NC-B15: give drawn Notes up to each share; the shortfall is Cheating."""
    s = em.state
    choice = s.choice
    assert choice is not None and choice.kind == "distribute"
    fp_to = cmd.first_player_to if cmd.HasField("first_player_to") else -1
    if fp_to >= 0:
        if not may_give_first_player(s, seat):
            raise refuse("NC-B13", "the First Player card can be given once per month, by its holder")
        if fp_to == seat or not 0 <= fp_to < s.seats or choice.shares[fp_to] < 1:
            raise refuse("NC-B12", "the First Player card goes to another player with a share")
    received = [0] * s.seats
    remaining = list(choice.notes)
    gifts: list[tuple[int, list[int]]] = []
    for gift in cmd.gifts:
        if gift.seat == seat or not 0 <= gift.seat < s.seats:
            raise refuse("NC-B08", "Notes are given to the other players")
        for n in gift.notes:
            if n not in remaining:
                raise refuse("NC-B08", "only the Notes drawn in this cash-in are distributed")
            remaining.remove(n)
        received[gift.seat] += len(gift.notes)
        gifts.append((gift.seat, list(gift.notes)))
    for p in range(s.seats):
        cap = choice.shares[p] - (1 if p == fp_to else 0)
        if p != seat and received[p] > cap:
            raise refuse("NC-B09", f"seat {p} may receive at most {cap} Notes")
    if fp_to >= 0:
        em(first_player_given=pb.FirstPlayerGiven(from_seat=seat, to_seat=fp_to))
    for to, notes in gifts:
        if notes:
            em(notes_given=pb.NotesGiven(from_seat=seat, to_seat=to, notes=notes, count=len(notes)))
    em(notes_banked=pb.NotesBanked(seat=seat, notes=remaining, count=len(remaining)))
    _cheat(em, seat, choice, received, fp_to)


def _cheat(em: Emitter, seat: int, choice: Choice, received: list[int], fp_to: int) -> None:
    """NC-B10/B11/B15: clockwise from the active player's left, one Vendetta per missing Note."""
    s = em.state
    softened = acting_power(choice.wiseguy) == "soften_cheat"  # NC-W118
    cheats = []
    for i in range(1, s.seats):
        p = (seat + i) % s.seats
        shortfall = choice.shares[p] - received[p] - (1 if p == fp_to else 0)
        if shortfall > 0:
            cheats.append(pb.Cheat(seat=p, shortfall=shortfall,
                                   draws=cheat_draws(s, p, shortfall, softened=softened)))
    if cheats:
        em(players_cheated=pb.PlayersCheated(reason="cash_in", cause=seat, cheats=cheats))


def default_distribution(state: State) -> pb.DistributeNotes:
    """NC-D05 timeout: no gift; clockwise from the left, Notes in draw order up to each share."""
    choice = state.choice
    assert choice is not None
    return pb.DistributeNotes(gifts=[pb.Gift(seat=p, notes=n) for p, n in _served(state, list(choice.notes)) if n])


def _served(state: State, notes: list[int]) -> list[tuple[int, list[int]]]:
    """Every other seat its full share, clockwise from the left, from `notes` in order."""
    choice = state.choice
    assert choice is not None
    gifts = []
    for i in range(1, state.seats):
        p = (choice.seat + i) % state.seats
        take, notes = notes[: choice.shares[p]], notes[choice.shares[p]:]
        gifts.append((p, take))
    return gifts


def forced_distribution(state: State) -> pb.DistributeNotes | None:
    """NC-D03: nothing drawn and no First Player gift possible leaves one (public) option."""
    choice = state.choice
    assert choice is not None
    if choice.notes or may_give_first_player(state, choice.seat):
        return None
    return pb.DistributeNotes()


def distribution_samples(state: State, limit: int) -> list[pb.Command]:
    """A bounded, representative sample of distributions. The complete set is every
    assignment of drawn Notes to other seats within their shares (times the optional
    First Player gift to a seat with a share); `decide` accepts any of them."""
    choice = state.choice
    assert choice is not None
    seat = choice.seat
    fair = [(p, n) for p, n in _served(state, list(choice.notes)) if n]
    variants: list[list[tuple[int, list[int]]]] = [fair, []]  # serve everyone / keep everything
    for mark in ("I", "G"):  # serve everyone, keeping the Notes of one mark (NC-V05)
        variants.append(_served(state, sorted(choice.notes, key=lambda n: NOTE_MARK[n] == mark)))
    for skip in range(len(fair)):  # cheat one player
        variants.append([g for i, g in enumerate(fair) if i != skip])
    for only in range(len(fair)):  # serve only one player
        variants.append([fair[only]])
    fp_targets = ([p for p in range(state.seats) if p != seat and choice.shares[p] >= 1]
                  if may_give_first_player(state, seat) else [])
    out: list[pb.Command] = []
    seen: set[bytes] = set()

    def add(gifts: list[tuple[int, list[int]]], fp: int) -> None:
        msg = pb.DistributeNotes(gifts=[pb.Gift(seat=p, notes=n) for p, n in gifts if n])
        if fp >= 0:
            msg.first_player_to = fp
        cmd = pb.Command(distribute_notes=msg)
        key = cmd.SerializeToString(deterministic=True)
        if key not in seen:
            seen.add(key)
            out.append(cmd)

    for v in variants:
        add(v, -1)
    for fp in fp_targets:  # the gift takes the place of one Note (NC-B12)
        add([(p, n[:-1] if p == fp else n) for p, n in fair], fp)
    return out[:limit]


