"""Small builders for Nostra City rule tests: a real setup, then the table arranged by hand."""

from __future__ import annotations

from typing import Any

from famiglia.engine import MatchConfig, Rng, RuleViolation, fold
from famiglia.nostra_city.v1 import nostra_city_pb2 as pb
from famiglia.rules.nostra_city import ENGINE
from famiglia.rules.nostra_city.data import NOTES
from famiglia.rules.nostra_city.state import State, replace


def start(seats: int = 4, seed: int = 7, **options: str) -> State:
    """A freshly set-up match; seat 0 holds the First Player card unless told otherwise."""
    opts = {"first_player_seat": "0", **options}
    return fold(ENGINE, ENGINE.setup(MatchConfig(seats=seats, options=opts), seed))


def seat(state: State, i: int, **changes: Any) -> State:
    players = list(state.players)
    players[i] = replace(players[i], **changes)
    return replace(state, players=tuple(players))


def table(state: State, **changes: Any) -> State:
    return replace(state, **changes)


def run(state: State, who: int, command: pb.Command, rng: int = 0) -> tuple[State, list[pb.Event]]:
    events = ENGINE.decide(state, who, command, Rng(rng))
    return fold(ENGINE, events, state), events


def kinds(events: list[pb.Event]) -> list[str]:
    return [e.WhichOneof("kind") for e in events]


def of_kind(events: list[pb.Event], kind: str) -> list[Any]:
    return [getattr(e, kind) for e in events if e.WhichOneof("kind") == kind]


def refused(state: State, who: int, command: pb.Command) -> str:
    try:
        ENGINE.decide(state, who, command, Rng(0))
    except RuleViolation as exc:
        return exc.code
    raise AssertionError("the command was accepted")


def notes(value: int, mark: str = "", k: int = 1, skip: int = 0) -> list[int]:
    """k Note ids of this face (from the Note set, NC-K32)."""
    found = [n.id for n in NOTES if n.value == value and n.mark == mark]
    return found[skip:skip + k]


# -- command builders ------------------------------------------------------------------------
def cash_in(wiseguy: str, turf: str, declared: str, power: bool = False) -> pb.Command:
    return pb.Command(cash_in=pb.CashIn(wiseguy=wiseguy, turf=turf, declared=declared, use_power=power))


def distribute(gifts: dict[int, list[int]] | None = None, fp: int | None = None) -> pb.Command:
    msg = pb.DistributeNotes(gifts=[pb.Gift(seat=s, notes=n) for s, n in (gifts or {}).items()])
    if fp is not None:
        msg.first_player_to = fp
    return pb.Command(distribute_notes=msg)


def bid(wiseguy: str, location: int, bid_notes: list[int]) -> pb.Command:
    return pb.Command(place_bid=pb.PlaceBid(wiseguy=wiseguy, location=location, notes=bid_notes))


def keep(kept: list[int]) -> pb.Command:
    return pb.Command(keep_notes=pb.KeepNotes(notes=kept))


def title(kind: str, to: int) -> pb.Command:
    return pb.Command(assign_title=pb.AssignTitle(title=kind, seat=to))


def corrupt(wiseguy: str, pile_notes: list[int] | None = None, *, deck: bool = False,
            token: bool = False) -> pb.Command:
    return pb.Command(corrupt=pb.Corrupt(wiseguy=wiseguy, notes=pile_notes or [], from_deck=deck,
                                         move_token=token))


def revenge(card: str, target: int, wiseguy: str = "", turf: str = "") -> pb.Command:
    return pb.Command(play_vendetta=pb.PlayVendetta(card=card, target=target, wiseguy=wiseguy, turf=turf))


def rage(target: int, wiseguy: str = "") -> pb.Command:
    return pb.Command(play_rage=pb.PlayRage(target=target, wiseguy=wiseguy))


END = pb.Command(end_turn=pb.EndTurn())


def business_table(seats: int = 4, **options: str) -> State:
    """Seat 0 to act in January's Business, with known Territories:
    seat 0: W01 W02 W18, Turfs T01 (Queens/Gambling) and T02 (Queens/Drugs)
    seat 1: W03 W04 W05, T04 (Brooklyn/Gambling), T13 (Connecticut: Bronx+Queens)
    seat 2: W06 W07 W08, T07 (Bronx/Gambling)
    seat 3: W09 W10 W11, T05 (Brooklyn/Drugs)   (when present)
    The Street holds R1 R2 R3 R4 and no Investigation."""
    s = start(seats, **options)
    layout = [
        (("W01", "W02", "W18"), ("T01", "T02")),
        (("W03", "W04", "W05"), ("T04", "T13")),
        (("W06", "W07", "W08"), ("T07",)),
        (("W09", "W10", "W11"), ("T05",)),
        (("W12", "W13", "W14"), ("T10",)),
    ]
    for i in range(seats):
        wg, tf = layout[i]
        s = seat(s, i, wiseguys=wg, turfs=tf, busy=frozenset(), cashins=())
    return table(s, street=("R1", "R2", "R3", "R4"), turn=0, order=tuple(range(seats)))


def meeting_table(seats: int = 4, **options: str) -> State:
    """The Business table moved to the Meeting, seat 0 first; every seat holds four $10,000s."""
    from famiglia.rules.nostra_city.state import Phase

    s = business_table(seats, **options)
    s = table(s, phase=Phase.MEETING, meeting_winners=frozenset(), meeting_bidders=frozenset(),
              resolution=0, locations_revealed=False)
    for i in range(seats):
        s = seat(s, i, bank=tuple(notes(10000, "I", 2, skip=2 * i) + notes(10000, "G", 2, skip=2 * i)))
    return s
