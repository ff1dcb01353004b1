"""Every golden playthrough regenerates from its own commands, line for line."""

from __future__ import annotations

from pathlib import Path

import pytest

from famiglia.engine.registry import default_registry
from famiglia.testing.playthrough import parse, render

FILES = sorted(Path(__file__).parent.glob("*/*.txt"))
REGISTRY = default_registry()


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.name}" for p in FILES])
def test_golden_playthrough_replays_exactly(path: Path) -> None:
    engine, seats, seed, options, commands = parse(path, REGISTRY.get)
    expected = path.read_text().splitlines()
    actual = render(engine, seats, seed, options, commands)
    for n, (want, got) in enumerate(zip(expected, actual, strict=False), start=1):
        assert got == want, f"{path.name}:{n} differs\n  golden: {want}\n  now:    {got}"
    assert len(actual) == len(expected), f"{path.name}: {len(expected)} lines golden, {len(actual)} now"


def test_there_are_golden_playthroughs_for_every_registered_game() -> None:
    games = {p.parent.name for p in FILES}
    missing = [g for g in REGISTRY if g not in games]
    assert not missing, f"no golden playthrough for {missing}"


def test_regenerating_an_unknown_game_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """`make golden GAME=grifter` (a typo) matched no file, regenerated nothing and said nothing,
    as if the goldens were up to date. It names the game and the ones there are."""
    from famiglia.testing.playthrough import main

    with pytest.raises(SystemExit) as stopped:
        main(["regen", "--game", "grifter"])
    assert stopped.value.code != 0
    said = capsys.readouterr().err
    assert "'grifter'" in said and "grifters" in said, said
