"""GC-K01: numeric options are ASCII digits within bounds; a bad one is a rule refusal, never a
crash of setup."""

from __future__ import annotations

import pytest

from famiglia.engine import MatchConfig, RuleViolation
from famiglia.rules.goodcritters import ENGINE
from famiglia.rules.goodcritters.config import MAX_PAYOFF_CARD_VALUE, MAX_TIMEOUT_S


@pytest.mark.parametrize(("key", "value", "rule"), [
    ("timeouts.step3_s", "\u00b2", "GC-D05"),  # str.isdigit() took it, int() crashed
    ("timeouts.turn_s", "9" * 5000, "GC-D06"),  # int() crashed on its digit limit
    ("timeouts.distribution_s", "99999999999999999999", "GC-D02"),
    ("timeouts.choose_s", str(MAX_TIMEOUT_S + 1), "GC-D06"),
    ("timeouts.choose_s", "0", "GC-D06"),
    ("timeouts.choose_s", "\u0663", "GC-D06"),
    ("payoff.card_value", "\u00b2", "GC-P03"),
    ("payoff.card_value", "99999999999999999999", "GC-P03"),
    ("payoff.card_value", str(MAX_PAYOFF_CARD_VALUE + 1), "GC-P03"),
    ("payoff.card_value", "-5", "GC-P03"),
])
@pytest.mark.parametrize("seats", [4, 8])
def test_gc_k01_out_of_range_and_malformed_numbers_are_refused(key: str, value: str, rule: str, seats: int) -> None:
    """GC-K01: out-of-range and malformed numbers are refused, naming the key's rule."""
    with pytest.raises(RuleViolation) as exc:
        ENGINE.setup(MatchConfig(seats, {key: value}), 1)
    assert exc.value.code == "GC-K01" and f"({rule})" in exc.value.message
    assert len(exc.value.message) < 200  # a long value is not echoed whole


@pytest.mark.parametrize(("key", "value"), [
    ("timeouts.step3_s", str(MAX_TIMEOUT_S)), ("timeouts.turn_s", "1"),
    ("payoff.card_value", "0"), ("payoff.card_value", str(MAX_PAYOFF_CARD_VALUE)),
])
def test_gc_k01_values_within_the_bounds_set_up_a_match(key: str, value: str) -> None:
    """GC-K01: values within the bounds set up a match."""
    assert ENGINE.setup(MatchConfig(4, {key: value}), 1)
