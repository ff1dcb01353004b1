"""Prebuilt events answer `visibility`, `redact` and `render_event` from their SHARED entry
(the command service asks all three of every event it stores), and the splits decide just
made are rendered from their values (SPLITS_MADE): the answers must be exactly the plain
definitions', for every viewer, on the first ask and on every later one."""

from __future__ import annotations

from typing import Any

import pytest

from famiglia.engine.protocol import Visibility
from famiglia.rules.goodcritters import ENGINE, render, view
from famiglia.rules.goodcritters import events as ev
from famiglia.rules.goodcritters.events import Event
from famiglia.testing.random_play import play_random

OPTIONS = [{}, {"payoff.enabled": "true"}, {"step3_mode": "turns", "payoff.enabled": "true"}]
SECRET = {"stash_dealt": ("cards",), "action_card_chosen": ("card",), "loot_skimmed": ("card",),
          "loot_stolen": ("card",), "gift_given": ("loot",), "offer_made": ("loot",),
          "offer_resolved": ("loot",)}


def plain_redact(event: Event, viewer: int | None) -> Event | None:
    """GC-H06, GC-H09, GC-H10, GC-P15 written out: the Visibility asked afresh every time."""
    vis: Visibility = view._visibility(event)
    if vis.allows(viewer):
        return event
    kind = event.WhichOneof("kind")
    if kind not in SECRET:
        return None
    out = Event()
    out.CopyFrom(event)
    for name in SECRET[kind]:
        getattr(out, kind).ClearField(name)
    return out


def _answers(event: Event, seats: int) -> list[Any]:
    out: list[Any] = [ENGINE.visibility(event), ENGINE.render_event(event)]
    for viewer in [None, *range(seats), seats + 3]:
        shown = ENGINE.redact(event, viewer)
        out.append(None if shown is None else (shown is event, shown.SerializeToString(deterministic=True)))
    return out


def _plain_answers(event: Event, seats: int) -> list[Any]:
    out: list[Any] = [view._visibility(event), render._render_event(event)]
    for viewer in [None, *range(seats), seats + 3]:
        shown = plain_redact(event, viewer)
        out.append(None if shown is None else (shown is event, shown.SerializeToString(deterministic=True)))
    return out


@pytest.mark.parametrize("options", OPTIONS)
def test_shared_events_answer_as_the_plain_definitions(options: dict[str, str]) -> None:
    shared = fresh = splits = 0
    for seats, seed in ((4, 0), (6, 1), (8, 2)):
        play = play_random(ENGINE, seats, seed, options)
        for event in play.events:
            plain = _plain_answers(event, seats)
            assert _answers(event, seats) == plain, event
            assert _answers(event, seats) == plain, event  # again, from the filled entry
            if id(event) in ev.SHARED:
                shared += 1
            else:
                fresh += 1
                splits += id(event) in ev.SPLITS_MADE
    assert shared > fresh > splits > 0  # every path is exercised, the shared one most


def test_every_shared_entry_holds_its_own_event() -> None:
    play_random(ENGINE, 5, 4)
    assert ev.SHARED
    for key, entry in ev.SHARED.items():
        assert id(entry[0]) == key and isinstance(entry[0], Event)


def test_a_private_shared_event_is_redacted_for_the_others() -> None:
    chosen = ev.action_card_chosen(2, 3, 1)
    assert ENGINE.redact(chosen, 2) is chosen
    other = ENGINE.redact(chosen, 1)
    assert other is not None and other is not chosen
    assert other.action_card_chosen.seat == 2 and other.action_card_chosen.card == 0
    assert ENGINE.redact(chosen, None) == other
    assert ENGINE.render_event(chosen) == render._render_event(chosen)
