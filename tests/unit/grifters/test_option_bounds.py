"""GR-F01: every option is checked for its type and range, so a bad value is a rule refusal,
never a crash of setup or an overflowing event field."""

from __future__ import annotations

import pytest

from famiglia.engine import MatchConfig, RuleViolation
from famiglia.rules.grifters import ENGINE
from famiglia.rules.grifters.config import MAX_ISK

HUGE = "99999999999999999999"


@pytest.mark.parametrize(("key", "value", "rule"), [
    ("isk_tokens", HUGE, "GR-S03"),  # the audit's CreateMatch: setup raised ValueError (INTERNAL)
    ("isk_tokens", str(MAX_ISK + 1), "GR-S03"),
    ("isk_tokens", "0", "GR-S03"),
    ("isk_tokens", "1e3", "GR-S03"),
    ("isk_tokens", "\u0663", "GR-S03"),  # a digit of another script
    ("isk_tokens", "9" * 5000, "GR-S03"),  # beyond int()'s digit limit
    ("coffers_by_players", f"2:50,3:65,4:75,5:{HUGE}", "GR-S04"),
    ("coffers_by_players", "2:50,2:60,3:65,4:75", "GR-S04"),
    ("colour_bonus", f"2:{HUGE}", "GR-E05"),
    ("colour_bonus", "99:2", "GR-E05"),
    ("cat_burglar_steal", f"1-{HUGE}", "GR-K17"),
    ("timeouts", "nan,30", "GR-D06"),
    ("timeouts", "inf,30", "GR-D06"),
    ("timeouts", "30,1e309", "GR-D06"),
    ("timeouts", "90,86401", "GR-D06"),
    ("timeouts", "-1,30", "GR-D06"),
    ("start_specialists", HUGE, "GR-S09"),
    ("max_rounds", HUGE, "GR-E08"),
    ("first_player_seat", HUGE, "GR-S12"),
])
@pytest.mark.parametrize("seats", [2, 4])
def test_gr_f01_out_of_range_and_malformed_numbers_are_refused(key: str, value: str, rule: str, seats: int) -> None:
    """GR-F01: out-of-range and malformed numbers are refused with the key's rule."""
    with pytest.raises(RuleViolation) as exc:
        ENGINE.setup(MatchConfig(seats, {key: value}), 1)
    assert exc.value.code == "GR-F01" and exc.value.message.startswith(rule)
    assert len(exc.value.message) < 200  # a long value is not echoed whole


@pytest.mark.parametrize(("key", "value"), [
    ("isk_tokens", str(MAX_ISK)), ("isk_tokens", " 80 "), ("timeouts", "0,0"), ("timeouts", "90.5,30"),
    ("colour_bonus", "2:2,3:4,4:8,5:16"), ("cat_burglar_steal", "0-0"),
])
def test_gr_f01_values_within_the_bounds_set_up_a_match(key: str, value: str) -> None:
    """GR-F01: values within the bounds set up a match."""
    assert ENGINE.setup(MatchConfig(2, {key: value}), 1)
