"""Matchmaking's own knobs, from FAMIGLIA_MM_* environment variables (the shared
addresses, Redis URL and secret come from famiglia.config.Settings)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from famiglia.config import flag, number
from famiglia.matchmaking import MatchPolicy

from .matcher import MatcherTuning
from .players import GUEST_TTL_S

DAY_S = 86_400
MAX_GUEST_TTL_DAYS = 36_500


def _seconds(e: Mapping[str, str], name: str, default: float | None) -> float | None:
    """Seconds of at least 0, or off (never)."""
    text = e.get(name, "").strip().lower()
    if text in ("off", "never", "none"):
        return None
    return number(name, 0.0, env=e) if text else default


def _guest_ttl_s(e: Mapping[str, str]) -> int | None:
    """FAMIGLIA_MM_GUEST_TTL_DAYS: days (a fraction too), as whole seconds; or off (guests kept for good). At least a day: a
    guest's record must outlive the tickets and tables made with it (a claimed table waits up to a
    day for CreateMatch), or its seat would be named by its id instead of its name. At most a
    century (`MAX_GUEST_TTL_DAYS`): Redis refuses an EXPIRE far beyond, and every use would fail."""
    name = "FAMIGLIA_MM_GUEST_TTL_DAYS"
    if e.get(name, "").strip().lower() in ("off", "never", "none"):
        return None
    days = number(name, GUEST_TTL_S / DAY_S, low=1.0, env=e)
    if days > MAX_GUEST_TTL_DAYS:
        raise SystemExit(f"{name}={e[name]!r} is more than {MAX_GUEST_TTL_DAYS} days (off keeps guests for good)")
    return int(days * DAY_S)


HOLD_S = (1.0, 3600.0)
"""FAMIGLIA_MM_HOLD, seconds. A player's lease must outlive the claim and the pin after it (two
round trips, longer over a network or through a failover): one that runs out first sends the table
back to the queue, so one always shorter matches nobody (0.4 ms became `PX 0`, which Redis refuses:
every tick failed). A matcher dying with leases keeps their players off every table that long: an
hour at most (1e17 was taken, and Redis refused every lease as out of range: every tick failed)."""
CLAIM_RETRY_S = (1.0, 3600.0)
"""FAMIGLIA_MM_CLAIM_RETRY, seconds. A claim younger than this is its own matcher's: with 0 every
replica took each claim it met at once, re-took its holds and asked CreateMatch for the table too,
and a table without an answer was asked again every pass (four times a second), never slower.
A claim is kept a day, its players pinned to it, so its table must be retried well within that
(an hour: five tries in the first five hours, then one every five); with 1e300 a table whose
matcher died or whose CreateMatch got no answer was never retried, its players kept off every
table for the day."""


def _seconds_within(e: Mapping[str, str], name: str, default: float, bounds: tuple[float, float]) -> float:
    """Seconds from `bounds[0]` to `bounds[1]`, or the process stops naming the setting and its range."""
    return number(name, default, bounds[0], e, high=bounds[1], unit="seconds")


@dataclass(frozen=True)
class MatchmakingSettings:
    policy: MatchPolicy = field(default_factory=MatchPolicy)
    tuning: MatcherTuning = field(default_factory=MatcherTuning)
    run_matcher: bool = True
    """run the matcher loop beside the gRPC server (turn off to scale them apart)."""
    guest_ttl_s: int | None = GUEST_TTL_S
    """an unused guest's record is dropped after this long (None: kept for good)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> MatchmakingSettings:
        """FAMIGLIA_MM_BACKFILL_AFTER (s, or off), _BOT_POLICY, _TICKET_TTL (s), _INVITE_TTL (s),
        _WINDOW_START, _WINDOW_GROWTH (mu per s), _WINDOW_MAX, _TICK (s), _CLAIM_RETRY (s, 1 to 3600),
        _HOLD (s, 1 to 3600), _MATCHER (on|off), _GUEST_TTL_DAYS (days, 1 to 36500, or off)."""
        e = os.environ if env is None else env
        d, t = MatchPolicy(), MatcherTuning()
        policy = MatchPolicy(
            window_start=number("FAMIGLIA_MM_WINDOW_START", d.window_start, env=e),
            window_growth=number("FAMIGLIA_MM_WINDOW_GROWTH", d.window_growth, env=e),
            window_max=number("FAMIGLIA_MM_WINDOW_MAX", d.window_max, env=e),
            backfill_after=_seconds(e, "FAMIGLIA_MM_BACKFILL_AFTER", d.backfill_after),
            bot_policy=e.get("FAMIGLIA_MM_BOT_POLICY", "").strip() or d.bot_policy,
            ticket_ttl=number("FAMIGLIA_MM_TICKET_TTL", d.ticket_ttl, env=e, above=True),
            invite_ttl=number("FAMIGLIA_MM_INVITE_TTL", d.invite_ttl, env=e, above=True),
        )
        tuning = MatcherTuning(
            interval_s=number("FAMIGLIA_MM_TICK", t.interval_s, env=e, above=True),
            claim_retry_ms=round(_seconds_within(e, "FAMIGLIA_MM_CLAIM_RETRY", t.claim_retry_ms / 1000,
                                                 CLAIM_RETRY_S) * 1000),
            hold_ms=round(_seconds_within(e, "FAMIGLIA_MM_HOLD", t.hold_ms / 1000, HOLD_S) * 1000),
        )
        run = flag("FAMIGLIA_MM_MATCHER", True, env=e)
        return cls(policy, tuning, run, _guest_ttl_s(e))
