"""The engine's fast paths (dict-copied states, per-state fold links) change nothing a caller can observe."""

from __future__ import annotations

import dataclasses

import pytest

from famiglia.engine import Rng
from famiglia.rules.nostra_city import ENGINE
from famiglia.rules.nostra_city.evolve import NEXT, evolve
from famiglia.rules.nostra_city.state import Bid, Choice, Draw, State, changed, replace, seat_changed, seat_in
from famiglia.testing.random_play import play_random

from .helpers import start


def _decided() -> tuple:
    s = start(4)
    seat = ENGINE.pending(s)[0].seat
    command = ENGINE.legal_commands(s, seat)[0]
    return s, ENGINE.decide(s, seat, command, Rng(1))


def test_fold_links_are_consumed_and_never_copied() -> None:
    s, events = _decided()
    assert NEXT in s.__dict__
    assert NEXT not in replace(s, month=s.month).__dict__   # a copy is another state: no link
    after = ENGINE.evolve(s, events[0])
    assert NEXT not in s.__dict__                            # consumed, so old states die young
    again = ENGINE.evolve(s, events[0])                      # a second fold recomputes
    assert again == after and again is not after


def test_a_fold_of_equal_but_other_events_gives_the_same_table() -> None:
    s, events = _decided()
    fast = s
    for e in events:
        fast = ENGINE.evolve(fast, e)
    slow = s
    for e in events:
        slow = evolve(slow, type(e).FromString(e.SerializeToString()))
    assert fast == slow


def test_replace_refuses_unknown_fields_and_keeps_the_original() -> None:
    s = start(3)
    with pytest.raises(TypeError):
        replace(s, no_such_field=1)
    changed = replace(s, month=s.month + 1)
    assert changed.month == s.month + 1 and changed != s and replace(changed, month=s.month) == s
    seat = replace(s.players[0], vendetta_drawn=3)
    assert seat.vendetta_drawn == 3 and s.players[0].vendetta_drawn == 0


def test_random_games_refold_from_scratch_to_the_live_table() -> None:
    for seed in range(3):
        p = play_random(ENGINE, 3 + seed, seed)
        state = None
        for e in p.events:
            state = evolve(state, type(e).FromString(e.SerializeToString()))
        assert state == p.state


def test_changed_is_replace_with_the_changes_in_a_dict() -> None:
    s, _ = _decided()   # s carries a fold link
    fast = changed(s, {"month": s.month + 1, "turn_acted": True})
    assert fast == dataclasses.replace(s, month=s.month + 1, turn_acted=True) and type(fast) is State
    assert NEXT not in fast.__dict__ and NEXT in s.__dict__   # the copy drops the link, the original keeps it
    with pytest.raises(TypeError):
        changed(s, {"no_such_field": 1})
    seat = seat_changed(s.players[1], {"bank": (1, 2)})
    assert seat == dataclasses.replace(s.players[1], bank=(1, 2)) and seat.bank == (1, 2)
    with pytest.raises(TypeError):
        seat_changed(s.players[1], {"no_such_field": 1})


def test_a_link_for_another_event_is_kept_and_ignored() -> None:
    s, events = _decided()
    other = type(events[0])()
    other.CopyFrom(events[0])   # equal, but not the folded object
    after = ENGINE.evolve(s, other)
    assert NEXT in s.__dict__ and after == s.__dict__[NEXT][1] and after is not s.__dict__[NEXT][1]


@pytest.mark.parametrize("cls", [Bid, Choice, Draw])
def test_dict_initialised_classes_behave_as_their_dataclass(cls: type) -> None:
    required = [f for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING]
    args = {f.name: (7 if f.type in ("int", int) else "x") for f in required}
    made = cls(**args)
    for f in dataclasses.fields(cls):
        assert getattr(made, f.name) == args.get(f.name, f.default)
    assert made == cls(*args.values()) and hash(made) == hash(cls(**args))
    assert dataclasses.replace(made, **{required[0].name: 8}) != made
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, required[0].name, 9)
    with pytest.raises(TypeError):
        cls()   # the required fields stay required


def test_seat_in_changes_one_seat_of_a_new_players_tuple() -> None:
    s = start(4)
    players = seat_in(s.players, 2, {"bank": (5, 6)})
    assert players[2] == dataclasses.replace(s.players[2], bank=(5, 6)) and players[2] != s.players[2]
    assert players[:2] == s.players[:2] and players[3] is s.players[3] and type(players) is tuple
    with pytest.raises(TypeError):
        seat_in(s.players, 2, {"no_such_field": 1})
