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


def test_a_value_spelled_otherwise_than_the_game_lists_it_is_refused() -> None:
    """Blanks around a value, or a listed option's value in another spelling: the game's reader
    might take " 5" or "True", but the match would show it as typed and matchmaking would pool
    it apart from "5" and "true"."""
    critters = REGISTRY.get("goodcritters")
    for options in ({"stash_counts_public": "True"}, {"skims_per_round": " 2"}, {"payoff.card_value": "1000 "},
                    {"step3_mode": "OPEN"}):
        refusal = options_refusal(critters, 4, options)
        assert refusal is not None and refusal[0] == "bad_option", (options, refusal)
        assert repr(next(iter(options.values()))) in refusal[1]
    for options in ({"stash_counts_public": "false"}, {"skims_per_round": "2"}, {"payoff.card_value": "1000"}):
        assert options_refusal(critters, 4, options) is None, options
    assert options_refusal(REGISTRY.get("nothing_personal"), 3, {"commission_turns": "\t30"})[0] == "bad_option"  # type: ignore[index]
