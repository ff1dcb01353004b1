"""The projection's own knobs, from FAMIGLIA_PROJECTION_* variables, beside the shared Settings."""

from __future__ import annotations

import os
from dataclasses import dataclass

from .runner import RunnerConfig


@dataclass(frozen=True)
class ProjectionSettings:
    group: str = "projection"
    consumer: str = ""
    batch: int = 100
    block_ms: int = 1000
    claim_idle_ms: int = 30_000
    claim_every_s: float = 5.0
    lag_every_s: float = 5.0
    cache_size: int = 2000

    @classmethod
    def from_env(cls) -> ProjectionSettings:
        env = os.environ.get
        return cls(
            group=env("FAMIGLIA_PROJECTION_GROUP", "projection"),
            consumer=env("FAMIGLIA_PROJECTION_CONSUMER", ""),
            batch=int(env("FAMIGLIA_PROJECTION_BATCH", "100")),
            block_ms=int(env("FAMIGLIA_PROJECTION_BLOCK_MS", "1000")),
            claim_idle_ms=int(env("FAMIGLIA_PROJECTION_CLAIM_IDLE_MS", "30000")),
            claim_every_s=float(env("FAMIGLIA_PROJECTION_CLAIM_EVERY_S", "5")),
            lag_every_s=float(env("FAMIGLIA_PROJECTION_LAG_EVERY_S", "5")),
            cache_size=int(env("FAMIGLIA_PROJECTION_CACHE", "2000")),
        )

    def runner_config(self, consumer: str = "") -> RunnerConfig:
        return RunnerConfig(group=self.group, consumer=consumer or self.consumer, batch=self.batch,
                            block_ms=self.block_ms, claim_idle_ms=self.claim_idle_ms,
                            claim_every_s=self.claim_every_s, lag_every_s=self.lag_every_s)
