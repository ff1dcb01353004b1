"""NC-K90: numeric options are whole numbers within bounds, every key checked whatever the
player count; a bad one is a rule refusal, never a crash of setup."""

from __future__ import annotations

import pytest

from famiglia.engine import MatchConfig, RuleViolation
from famiglia.rules.nostra_city import ENGINE


@pytest.mark.parametrize(("key", "value"), [
    ("verdict_start_3", "21"),
    ("verdict_start_4", "nan"),  # another table size's key: recorded with the match, so checked too
    ("verdict_start_5", "99999999999999999999"),
    ("verdict_start_5", "\u0663"),
    ("turn_timeout_s", "86401"),
    ("turn_timeout_s", "1e3"),
    ("choice_timeout_s", "-1"),
    ("choice_timeout_s", "9" * 5000),
])
@pytest.mark.parametrize("seats", [3, 5])
def test_nc_k90_out_of_range_and_malformed_numbers_are_refused(key: str, value: str, seats: int) -> None:
    """NC-K90: out-of-range and malformed numbers are refused."""
    with pytest.raises(RuleViolation) as exc:
        ENGINE.setup(MatchConfig(seats, {key: value}), 1)
    assert exc.value.code == "NC-K90" and key in exc.value.message
    assert len(exc.value.message) < 200  # a long value is not echoed whole


@pytest.mark.parametrize(("key", "value"), [
    ("verdict_start_3", "-20"), ("verdict_start_5", "20"), ("turn_timeout_s", "86400"), ("choice_timeout_s", "0"),
])
def test_nc_k90_values_within_the_bounds_set_up_a_match(key: str, value: str) -> None:
    """NC-K90: values within the bounds set up a match."""
    assert ENGINE.setup(MatchConfig(4, {key: value}), 1)
