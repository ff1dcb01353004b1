"""ListLegalCommands over a compound choice: the fixed samples, or draws from all of it with a seed
(DESIGN.md, `legal_commands`: "a complete generator/sampler that covers them all")."""

from __future__ import annotations

import pytest

from famiglia.config import Settings
from famiglia.engine.registry import default_registry
from famiglia.eventstore.memory_store import InMemoryEventStore
from services.command.app import CommandApp, NextSeat, Viewer
from services.command.bootstrap import bootstrap

REGISTRY = default_registry()


def _keys(commands) -> list[bytes]:
    return [c.SerializeToString(deterministic=True) for c in commands]


def _to_a_compound_choice(app: CommandApp, game_id: str) -> tuple[str, Viewer, str]:
    """Play the first legal command of whoever is pending until a seat's answer is a sample."""
    engine = REGISTRY.get(game_id)
    created = app.create_match(game_id, engine.info.min_players, seed=11)
    mid = created.match_id
    for n in range(2_000):
        m = app.matches.get(mid).match
        pendings = engine.pending(m.state)
        assert pendings, f"{game_id}: the match ended before any compound choice"
        for p in pendings:
            viewer = app.viewer(mid, created.seat_tokens[p.seat])
            if not app.legal_commands(mid, viewer).complete:
                return mid, viewer, created.seat_tokens[p.seat]
        seat = pendings[n % len(pendings)].seat
        viewer = app.viewer(mid, created.seat_tokens[seat])
        app.submit(mid, viewer, f"c{n}", app.legal_commands(mid, viewer).commands[0])
    raise AssertionError(f"{game_id}: no compound choice in 2,000 commands")


@pytest.mark.parametrize("game_id", sorted(REGISTRY))
def test_a_sample_seed_draws_from_the_whole_compound_choice(game_id: str) -> None:
    app = bootstrap(store=InMemoryEventStore(), settings=Settings(secret="unit-test-secret"))
    mid, viewer, _ = _to_a_compound_choice(app, game_id)
    fixed = app.legal_commands(mid, viewer)
    assert not fixed.complete, "a compound choice's samples are not called complete"
    assert _keys(app.legal_commands(mid, viewer).commands) == _keys(fixed.commands), "no seed: the same samples"
    drawn = app.legal_commands(mid, viewer, sample_seed=7)
    assert not drawn.complete and drawn.version == fixed.version
    assert _keys(app.legal_commands(mid, viewer, sample_seed=7).commands) == _keys(drawn.commands), \
        "the same seed draws the same members"
    seen = set(_keys(fixed.commands))
    for seed in range(1, 40):
        seen.update(_keys(app.legal_commands(mid, viewer, limit=16, sample_seed=seed).commands))
    assert len(seen - set(_keys(fixed.commands))) > 0, "the draws reach members the fixed samples never list"
    # and whatever was drawn is a command the server takes
    app.submit(mid, viewer, "drawn", app.legal_commands(mid, viewer, sample_seed=99).commands[-1])


@pytest.mark.parametrize("game_id", sorted(REGISTRY))
def test_ask_next_calls_a_sample_incomplete_as_list_legal_commands_does(game_id: str) -> None:
    app = bootstrap(store=InMemoryEventStore(), settings=Settings(secret="unit-test-secret"))
    mid, viewer, token = _to_a_compound_choice(app, game_id)
    listed = app.legal_commands(mid, viewer)
    asked = app.submit_chain(mid, [], ask_next=[NextSeat(token, view=False)])
    (mine,) = [n for n in asked.next if n.seat == viewer.seat]
    assert _keys(mine.legal) == _keys(listed.commands) and mine.complete is listed.complete is False
