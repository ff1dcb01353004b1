"""Building Grifters tables by hand and acting on them (pure, no services)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from famiglia.engine import MatchConfig, Rng, fold
from famiglia.rules.grifters import ENGINE
from famiglia.rules.grifters import commands as C
from famiglia.rules.grifters.data import SPECIALISTS
from famiglia.rules.grifters.state import State, in_hand_order, replace_player, replace_state

IM, RECRUITER, INFORMANT, FORGER, FIXER = "SP01-1", "SP02-1", "SP03-1", "SP04-1", "SP05-1"
CON, WHEEL, FEMME, SMUGGLER, CAT = "SP06-1", "SP07-1", "SP08-1", "SP09-1", "SP10-1"
THUG, MIDDLE, FALL, KIDNAP, ENFORCER, HITMAN = "SP11-1", "SP12-1", "SP13-1", "SP14-1", "SP15-1", "SP16-1"


def sp(nn: int, copy: int = 1) -> str:
    return f"SP{nn:02d}-{copy}"


def new_game(seats: int = 2, seed: int = 1, **options: str) -> State:
    return fold(ENGINE, ENGINE.setup(MatchConfig(seats, dict(options)), seed))


def table(
    seats: int = 2,
    *,
    hands: Mapping[int, Sequence[str]] | None = None,
    nights: Mapping[int, Sequence[Sequence[str]]] | None = None,
    tokens: Mapping[int, Sequence[bool]] | None = None,
    refresh: Mapping[int, Sequence[str]] | None = None,
    stash: Mapping[int, int] | None = None,
    jobs: Mapping[int, Sequence[str]] | None = None,
    coffers: int | None = None,
    deck: Sequence[str] | None = None,
    discard: Sequence[str] = (),
    stacks: Sequence[tuple[str, Sequence[str]]] | None = None,
    active: int = 0,
    had_turn: bool = True,
    options: Mapping[str, str] | None = None,
) -> State:
    """A table where seat `active` must make the play decision. Hands default to the seat's
    Ringleaders only; the deck defaults to every Specialist not placed elsewhere, canonical order."""
    s = new_game(seats, **{"first_player_seat": str(active), **(options or {})})
    players = list(s.players)
    used: set[str] = set(discard)
    for seat in range(seats):
        p = players[seat]
        hand = tuple(hands[seat]) if hands and seat in hands else tuple(c for c in p.hand if c.startswith("R"))
        ns = tuple(tuple(g) for g in nights[seat]) if nights and seat in nights else ((), (), ())
        p = replace_player(
            p,
            hand=in_hand_order(hand),
            nights=ns,
            tokens=tuple(tokens[seat]) if tokens and seat in tokens else (False, False, False),
            refresh=tuple(refresh[seat]) if refresh and seat in refresh else (),
            stash=stash[seat] if stash and seat in stash else p.stash,
            jobs=tuple(jobs[seat]) if jobs and seat in jobs else (),
            had_turn=had_turn,
        )
        used.update(p.hand, p.refresh, *p.nights)
        players[seat] = p
    if deck is None:
        deck = [c.id for c in SPECIALISTS if c.id not in used]
    changes: dict[str, Any] = {"players": tuple(players), "deck": tuple(deck), "discard": tuple(discard)}
    if coffers is not None:
        changes["coffers"] = coffers
    if stacks is not None:
        changes["stacks"] = tuple((c, tuple(j)) for c, j in stacks)
    return replace_state(s, **changes)


def act(state: State, command: Any, seat: int | None = None, seed: int = 0) -> tuple[State, list[Any]]:
    """Decide and fold one command of the active seat (or `seat`)."""
    events = ENGINE.decide(state, state.active if seat is None else seat, command, Rng(seed))
    return fold(ENGINE, events, state), events


def kinds(events: Sequence[Any]) -> list[str]:
    return [e.WhichOneof("kind") for e in events]


def of_kind(events: Sequence[Any], kind: str) -> list[Any]:
    return [getattr(e, kind) for e in events if e.WhichOneof("kind") == kind]


def caper(card: str, use_defaults: bool = False) -> Any:
    return C.pull_caper(card, use_defaults)


def job(job_id: str, *team: str) -> Any:
    return C.complete_job(job_id, team)


def answer(choice: str, value: Any) -> Any:
    return C.answer_command(choice, value)
