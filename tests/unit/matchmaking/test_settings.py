"""FAMIGLIA_MM_* variables become the matcher's policy and tuning."""

from __future__ import annotations

import pytest

from services.matchmaking.settings import MatchmakingSettings


def test_defaults_without_environment() -> None:
    s = MatchmakingSettings.from_env({})
    assert s.policy.backfill_after == 30.0 and s.policy.bot_policy == "heuristic"
    assert s.tuning.claim_retry_ms == 5000 and s.run_matcher
    assert (s.policy.invite_ttl, s.tuning.hold_ms) == (120.0, 10_000)


def test_every_knob_is_read() -> None:
    s = MatchmakingSettings.from_env({
        "FAMIGLIA_MM_BACKFILL_AFTER": "off", "FAMIGLIA_MM_BOT_POLICY": "ismcts?iterations=50",
        "FAMIGLIA_MM_TICKET_TTL": "90", "FAMIGLIA_MM_WINDOW_START": "1", "FAMIGLIA_MM_WINDOW_GROWTH": "0.5",
        "FAMIGLIA_MM_WINDOW_MAX": "10", "FAMIGLIA_MM_TICK": "0.1", "FAMIGLIA_MM_CLAIM_RETRY": "2.5",
        "FAMIGLIA_MM_MATCHER": "off", "FAMIGLIA_MM_INVITE_TTL": "45", "FAMIGLIA_MM_HOLD": "3",
    })
    assert s.policy.backfill_after is None and s.policy.bot_policy == "ismcts?iterations=50"
    assert (s.policy.ticket_ttl, s.policy.window(4), s.policy.window(100)) == (90.0, 3.0, 10.0)
    assert (s.tuning.interval_s, s.tuning.claim_retry_ms, s.run_matcher) == (0.1, 2500, False)
    assert (s.policy.invite_ttl, s.tuning.hold_ms) == (45.0, 3000)


def test_guest_ttl_is_days_of_at_least_one_or_off() -> None:
    """FAMIGLIA_MM_GUEST_TTL_DAYS: 180 days by default; off keeps guests for good; under a day a
    guest's record could go while a table made with it waits for CreateMatch (a day at most)."""
    assert MatchmakingSettings.from_env({}).guest_ttl_s == 180 * 86_400
    assert MatchmakingSettings.from_env({"FAMIGLIA_MM_GUEST_TTL_DAYS": "30"}).guest_ttl_s == 30 * 86_400
    assert MatchmakingSettings.from_env({"FAMIGLIA_MM_GUEST_TTL_DAYS": "1.5"}).guest_ttl_s == 129_600
    assert MatchmakingSettings.from_env({"FAMIGLIA_MM_GUEST_TTL_DAYS": "off"}).guest_ttl_s is None
    for bad in ("0.5", "0", "-3", "soon"):
        with pytest.raises(SystemExit, match="FAMIGLIA_MM_GUEST_TTL_DAYS"):
            MatchmakingSettings.from_env({"FAMIGLIA_MM_GUEST_TTL_DAYS": bad})


def test_a_guest_ttl_redis_cannot_take_stops_the_process() -> None:
    """1e12 days was taken, then every use's EXPIRE was refused by Redis ("invalid expire time"):
    each registration and CreateTicket failed. Over a century: `off` is the word for good."""
    assert MatchmakingSettings.from_env({"FAMIGLIA_MM_GUEST_TTL_DAYS": "36500"}).guest_ttl_s == 36_500 * 86_400
    for bad in ("36501", "1e12", "1e300"):
        with pytest.raises(SystemExit, match="FAMIGLIA_MM_GUEST_TTL_DAYS"):
            MatchmakingSettings.from_env({"FAMIGLIA_MM_GUEST_TTL_DAYS": bad})


@pytest.mark.parametrize("name", ["FAMIGLIA_MM_HOLD", "FAMIGLIA_MM_CLAIM_RETRY"])
@pytest.mark.parametrize("bad", ["0", "0.0004", "0.5", "-1", "3600.5", "1e17", "1e300", "inf", "nan", "10s"])
def test_a_hold_or_claim_retry_that_stops_matching_stops_the_process_naming_the_range(name: str, bad: str) -> None:
    """Both were taken from 0 (the claim retry) or a millisecond (the hold) up to any size: a hold
    shorter than the claim and pin sends every table back to the queue, a claim retry of 0 has every
    replica ask CreateMatch for every claimed table, and either one huge stops tables for good (a
    lease Redis refuses as out of range; a table that got no answer never retried)."""
    with pytest.raises(SystemExit, match=rf"{name}='{bad}' is not a number of seconds from 1 to 3600"):
        MatchmakingSettings.from_env({name: bad})


def test_a_hold_and_a_claim_retry_from_a_second_to_an_hour_are_taken() -> None:
    for seconds, ms in (("1", 1000), ("2.5", 2500), ("3600", 3_600_000), (" ", None)):
        s = MatchmakingSettings.from_env({"FAMIGLIA_MM_HOLD": seconds, "FAMIGLIA_MM_CLAIM_RETRY": seconds})
        assert (s.tuning.hold_ms, s.tuning.claim_retry_ms) == ((ms, ms) if ms else (10_000, 5000))
