"""Many engine tests skip when a game is not registered ("no game engine registered yet":
scaffolding from before the engines landed). All four engines are in this repository, so a
game missing from the registry the tests see would quietly turn those tests into skips."""

from __future__ import annotations

from famiglia.engine.registry import KNOWN_GAMES, default_registry


def test_every_known_game_is_registered_where_the_tests_run() -> None:
    registered = sorted(default_registry())
    assert registered == sorted(KNOWN_GAMES), (
        f"the tests see {registered}, not every known game: an engine fails to import, or "
        "FAMIGLIA_GAMES is set (unset it to run the suite); the tests of the others would skip")
