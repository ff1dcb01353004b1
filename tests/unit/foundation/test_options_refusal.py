"""The games' verdict on a table's options before any match exists (famiglia.engine.options_refusal)."""

from __future__ import annotations

from famiglia.engine import options_refusal
from famiglia.engine.registry import default_registry

REGISTRY = default_registry()


def test_every_game_accepts_its_defaults_and_names_what_it_refuses() -> None:
    for engine in REGISTRY.engines():
        info = engine.info
        assert options_refusal(engine, info.min_players, {}) is None
        assert options_refusal(engine, info.min_players, {"no_such_option": "1"})[0] == "unknown_option"  # type: ignore[index]
        refusal = options_refusal(engine, info.max_players + 1, {})
        assert refusal is not None and refusal[0][:3] in ("GC-", "GR-", "NC-", "NP-")


def test_a_value_the_game_cannot_read_is_refused_with_its_rule_id() -> None:
    refusal = options_refusal(REGISTRY.get("grifters"), 4, {"isk_tokens": "99999999999999999999"})
    assert refusal is not None and refusal[0] == "GR-F01"
