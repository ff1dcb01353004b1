"""Matchmaking's own knobs, from FAMIGLIA_MM_* environment variables (the shared
addresses, Redis URL and secret come from famiglia.config.Settings)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from famiglia.matchmaking import MatchPolicy

from .matcher import MatcherTuning


def _seconds(value: str | None, default: float | None) -> float | None:
    if value is None or value.strip() == "":
        return default
    if value.strip().lower() in ("off", "never", "none"):
        return None
    return float(value)


@dataclass(frozen=True)
class MatchmakingSettings:
    policy: MatchPolicy = field(default_factory=MatchPolicy)
    tuning: MatcherTuning = field(default_factory=MatcherTuning)
    run_matcher: bool = True
    """run the matcher loop beside the gRPC server (turn off to scale them apart)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> MatchmakingSettings:
        """FAMIGLIA_MM_BACKFILL_AFTER (s, or off), _BOT_POLICY, _TICKET_TTL (s), _INVITE_TTL (s),
        _WINDOW_START, _WINDOW_GROWTH (mu per s), _WINDOW_MAX, _TICK (s), _CLAIM_RETRY (s), _HOLD (s),
        _MATCHER (on|off)."""
        e = os.environ if env is None else env
        d, t = MatchPolicy(), MatcherTuning()
        policy = MatchPolicy(
            window_start=float(e.get("FAMIGLIA_MM_WINDOW_START", d.window_start)),
            window_growth=float(e.get("FAMIGLIA_MM_WINDOW_GROWTH", d.window_growth)),
            window_max=float(e.get("FAMIGLIA_MM_WINDOW_MAX", d.window_max)),
            backfill_after=_seconds(e.get("FAMIGLIA_MM_BACKFILL_AFTER"), d.backfill_after),
            bot_policy=e.get("FAMIGLIA_MM_BOT_POLICY", d.bot_policy),
            ticket_ttl=float(e.get("FAMIGLIA_MM_TICKET_TTL", d.ticket_ttl)),
            invite_ttl=float(e.get("FAMIGLIA_MM_INVITE_TTL", d.invite_ttl)),
        )
        tuning = MatcherTuning(
            interval_s=float(e.get("FAMIGLIA_MM_TICK", t.interval_s)),
            claim_retry_ms=int(float(e.get("FAMIGLIA_MM_CLAIM_RETRY", t.claim_retry_ms / 1000)) * 1000),
            hold_ms=int(float(e.get("FAMIGLIA_MM_HOLD", t.hold_ms / 1000)) * 1000),
        )
        run = e.get("FAMIGLIA_MM_MATCHER", "on").strip().lower() not in ("off", "0", "false", "no")
        return cls(policy, tuning, run)
