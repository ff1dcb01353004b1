"""How the bots' Celery workers are laid out: one single-process worker per core by
default, Celery's per-task INFO lines quiet, our own line kept."""

from __future__ import annotations

import logging

import pytest

from services.bots.bootstrap import BotsSettings
from services.bots.worker import QUIET_LOGGERS, layout, quiet_celery_task_logs, worker_argv


def test_one_solo_worker_per_core_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FAMIGLIA_BOTS_POOL", "FAMIGLIA_BOTS_CONCURRENCY", "FAMIGLIA_BOTS_THREADS_PER_WORKER"):
        monkeypatch.delenv(name, raising=False)
    settings = BotsSettings.from_env()
    assert (settings.pool, settings.threads_per_worker) == ("solo", 2)
    assert settings.workers >= 1
    monkeypatch.setenv("FAMIGLIA_BOTS_POOL", "prefork")
    monkeypatch.setenv("FAMIGLIA_BOTS_CONCURRENCY", "3")
    monkeypatch.setenv("FAMIGLIA_BOTS_THREADS_PER_WORKER", "1")
    settings = BotsSettings.from_env()
    assert (settings.pool, settings.workers, settings.threads_per_worker) == ("prefork", 3, 1)


def test_one_solo_process_still_runs_its_threads() -> None:
    """A container given one core (deploy/k8s: FAMIGLIA_BOTS_CONCURRENCY=1) ran a plain solo
    worker, one decision at a time, whatever FAMIGLIA_BOTS_THREADS_PER_WORKER said: only forked
    processes got their `threads` pool."""
    assert layout(BotsSettings(concurrency=1)) == (1, "threads", 2)
    assert layout(BotsSettings(concurrency=4)) == (4, "threads", 2)
    assert layout(BotsSettings(concurrency=1, threads_per_worker=1)) == (1, "solo", 1)
    assert layout(BotsSettings(pool="prefork", concurrency=3)) == (1, "prefork", 3)


def test_a_worker_listens_on_both_queues_under_its_own_name() -> None:
    argv = worker_argv("solo", 1, "INFO", name="bots-7-0")
    assert argv[argv.index("-P") + 1] == "solo" and argv[argv.index("-c") + 1] == "1"
    assert argv[argv.index("-Q") + 1] == "famiglia.bots,famiglia.clocks"
    assert argv[argv.index("-n") + 1].startswith("bots-7-0@")


def test_celery_per_task_lines_are_quiet_but_its_warnings_are_not() -> None:
    quiet_celery_task_logs()
    for name in QUIET_LOGGERS:
        logger = logging.getLogger(name)
        assert not logger.isEnabledFor(logging.INFO) and logger.isEnabledFor(logging.WARNING)
