"""Options of Nothing Personal are checked for type and range; a bad one is refused with its
key's rule id (unknown keys with NP-X21), never a crash of setup."""

from __future__ import annotations

import pytest

from famiglia.engine import MatchConfig, RuleViolation
from famiglia.rules.nothing_personal import ENGINE


@pytest.mark.parametrize(("key", "value", "rule"), [
    ("commission_turns", "61", "NP-C33"),
    ("commission_turns", "\u0663", "NP-C33"),
    ("offers_per_phase", "99999999999999999999", "NP-M9"),
    ("chats_per_phase", "9" * 5000, "NP-M10"),
    ("autopass_changes_per_phase", "1e1", "NP-M10"),
    ("colours", "red,blue,green,yellow,black,white", "NP-S2"),
    ("colours", "red,blue," + "x" * 100, "NP-S2"),
    ("colours", "red,blue,\x00", "NP-S2"),
    ("expansions", "x" * 1000, "NP-V7"),
    ("x" * 1000, "1", "NP-X21"),
])
def test_np_out_of_range_and_malformed_options_are_refused_with_their_rule(key: str, value: str, rule: str) -> None:
    """NP-X21: out-of-range and malformed options are refused with their key's rule id."""
    with pytest.raises(RuleViolation) as exc:
        ENGINE.setup(MatchConfig(3, {key: value}), 1)
    assert exc.value.code == rule
    assert len(exc.value.message) < 300  # a long value is not echoed whole


def test_np_s2_named_colours_set_up_a_match() -> None:
    """NP-S2: colours named by the configuration set up a match."""
    assert ENGINE.setup(MatchConfig(3, {"colours": "red,blue,green"}), 1)
