"""Settings read from the environment: documented values mean what the docs say, and an
invalid value is refused with a clear message rather than accepted or crashing later."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from famiglia.config import Settings

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("value", ["many", "0", "-8"])
def test_an_invalid_worker_count_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path, value: str) -> None:
    """FAMIGLIA_GRPC_WORKERS: "many" fails with `invalid literal for int() with base 10`
    (which variable?); "0" is accepted, and the command service then starts with a stream
    gate of 0 and refuses every StreamEvents with RESOURCE_EXHAUSTED too_many_streams."""
    monkeypatch.setenv("FAMIGLIA_VAR_DIR", str(tmp_path))
    monkeypatch.setenv("FAMIGLIA_SECRET", "s")
    monkeypatch.setenv("FAMIGLIA_GRPC_WORKERS", value)
    with pytest.raises((ValueError, SystemExit), match="FAMIGLIA_GRPC_WORKERS"):
        Settings.from_env()


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, PYTHONPATH=f"{ROOT / 'libs'}{os.pathsep}{ROOT}", **env)
    return subprocess.run([sys.executable, "-m", "famiglia.cli.main", *args], env=full, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_a_bad_redis_port_is_a_clear_message_not_a_traceback_on_every_command(tmp_path: Path) -> None:
    """FAMIGLIA_REDIS_PORT is parsed when famiglia.localstack.stack is imported, which the CLI
    imports for every command: a typo makes even `famiglia --help` a ValueError traceback."""
    done = _cli({"FAMIGLIA_REDIS_PORT": "63 90", "FAMIGLIA_VAR_DIR": str(tmp_path)}, "--help")
    assert "Traceback" not in done.stderr, done.stderr[-800:]
    assert done.returncode == 0


def test_log_level_typo_is_not_silently_info(monkeypatch: pytest.MonkeyPatch) -> None:
    """FAMIGLIA_LOG_LEVEL=warnign (a typo) silently logs at info: configure() falls back to
    INFO for any name `logging` does not know, with no word to the operator."""
    import logging

    import structlog

    import famiglia.telemetry as telemetry

    # configure() touches process-wide state: keep all of it as it was
    monkeypatch.setattr(telemetry, "_configured", None)
    monkeypatch.setattr(telemetry, "_json_out", telemetry._json_out)
    monkeypatch.setattr(telemetry, "_held", telemetry._held)
    monkeypatch.setattr(telemetry, "_configure_tracing", lambda service: None)
    monkeypatch.setattr(structlog, "configure", lambda **kw: None)
    monkeypatch.setattr(logging, "basicConfig", lambda **kw: None)
    monkeypatch.setenv("FAMIGLIA_LOG_LEVEL", "warnign")
    with pytest.raises((ValueError, SystemExit), match="FAMIGLIA_LOG_LEVEL"):
        telemetry.configure("review")
