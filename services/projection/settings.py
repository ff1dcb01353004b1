"""The projection's own knobs, from FAMIGLIA_PROJECTION_* variables, beside the shared Settings.

The consumer's knobs are `RunnerConfig`'s fields, each read from
FAMIGLIA_PROJECTION_<FIELD> (FAMIGLIA_PROJECTION_BATCH, ..._CLAIM_IDLE_MS, ...), so
a new field of the runner is configurable without being listed twice.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from famiglia.config import number, whole

from .runner import RunnerConfig

PREFIX = "FAMIGLIA_PROJECTION_"


@dataclass(frozen=True)
class ProjectionSettings:
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    cache_size: int = 2000
    """Live matches kept folded in memory (FAMIGLIA_PROJECTION_CACHE)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ProjectionSettings:
        env = os.environ if env is None else env
        knobs = {f.name: _parse(PREFIX + f.name.upper(), f.default, env)
                 for f in fields(RunnerConfig) if PREFIX + f.name.upper() in env}
        return cls(RunnerConfig(**knobs), whole(PREFIX + "CACHE", cls.cache_size, env=env))

    def runner_config(self, consumer: str = "") -> RunnerConfig:
        """The runner's configuration; `consumer` overrides the configured consumer name."""
        return replace(self.runner, consumer=consumer) if consumer else self.runner


_LEAST = {PREFIX + "BATCH": 1, PREFIX + "BLOCK_MS": 1, PREFIX + "CLAIM_IDLE_MS": 1000, PREFIX + "RETRY_MAX_MS": 20}
"""Whole-number knobs whose 0 is no setting: XREADGROUP COUNT 0 reads everything, and a read
that never waits (the consumer reads without BLOCK for 0, as BLOCK 0 waits forever) has an idle
consumer read again at once, on and on (tens of thousands of reads a second). An entry is taken
over from another consumer only after a second unacked at least: below that, consumers took each
other's batches while they were being projected (harmless, by the version fence, but all waste).
The waits between tries of deferred entries start at 20 ms (`RETRY_FIRST_MS`) and double up to
RETRY_MAX_MS: a longest wait below the first is no setting either."""


def _parse(name: str, default: Any, env: Mapping[str, str]) -> Any:
    """A knob's text as the type of its default: a whole number or a number of at least 0
    (a batch and a read's wait at least 1), or text; a value that is none of these stops the process."""
    if isinstance(default, int):
        return whole(name, default, low=_LEAST.get(name, 0), env=env)
    if isinstance(default, float):
        return number(name, default, env=env)
    return env[name] if env[name].strip() else default  # blank: the default
