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


def _bots() -> object:
    from services.bots.bootstrap import BotsSettings
    return BotsSettings.from_env()


def _replay() -> object:
    from services.replay.bootstrap import ReplaySettings
    return ReplaySettings.from_env()


def _projection() -> object:
    from services.projection.settings import ProjectionSettings
    return ProjectionSettings.from_env()


def _matchmaking() -> object:
    from services.matchmaking.settings import MatchmakingSettings
    return MatchmakingSettings.from_env()


def _command() -> object:
    from services.command.__main__ import call_workers
    return call_workers()


def _stuck_call_s() -> object:
    from services.command.__main__ import stuck_call_s
    return stuck_call_s()


def _chat() -> object:
    from services.command.chat import ChatSettings
    return ChatSettings.from_env()


def _command_settings() -> object:
    from services.command.bootstrap import CommandSettings
    return CommandSettings.from_env()


def _registry() -> object:
    from famiglia.engine.registry import default_registry
    return default_registry()


@pytest.mark.parametrize(("read", "name", "value"), [
    # each was an int()/float() traceback naming no variable, or was taken and misbehaved later
    (_command, "FAMIGLIA_COMMAND_CALL_WORKERS", "three"),
    (_command, "FAMIGLIA_COMMAND_CALL_WORKERS", "0"),  # was the whole shared pool (`0 or workers`)
    (_stuck_call_s, "FAMIGLIA_COMMAND_STUCK_CALL_S", "0"),  # every call would be stuck at once
    (_stuck_call_s, "FAMIGLIA_COMMAND_STUCK_CALL_S", "-30"),
    (_stuck_call_s, "FAMIGLIA_COMMAND_STUCK_CALL_S", "nan"),
    (_stuck_call_s, "FAMIGLIA_COMMAND_STUCK_CALL_S", "30s"),
    (_command_settings, "FAMIGLIA_HOT_MATCHES", "0"),  # no match kept: every command would fold its match anew
    (_command_settings, "FAMIGLIA_HOT_MATCHES_MB", "1.5"),
    (_command_settings, "FAMIGLIA_HOT_MATCHES_MB", "-512"),
    (_command_settings, "FAMIGLIA_TIMEOUTS_TO_BOT", "never"),
    (_command_settings, "FAMIGLIA_TIMEOUTS_TO_BOT", "-1"),
    (_command_settings, "FAMIGLIA_LEAVE_POLICY", "smart"),  # no bot would play the seat a player left
    (_command_settings, "FAMIGLIA_LEAVE_POLICY", "heuristic?samples=0"),
    (_bots, "FAMIGLIA_BOTS_CONCURRENCY", "-2"),
    (_bots, "FAMIGLIA_BOTS_STALL_SECONDS", "0"),  # every decision queued again at once
    (_bots, "FAMIGLIA_BOTS_TASK_TIME_LIMIT", "nan"),
    (_bots, "FAMIGLIA_BOTS_CLOCK_GRACE", "-1"),
    (_bots, "FAMIGLIA_BOTS_THREADS_PER_WORKER", "0"),
    (_bots, "FAMIGLIA_BOTS_LEASE_MOVES", "lots"),
    (_bots, "FAMIGLIA_BOTS_POOL", "gevnet"),  # Celery's own refusal came only at the worker's start
    (_replay, "FAMIGLIA_REPLAY_SNAPSHOT_EVERY", "0"),
    (_replay, "FAMIGLIA_REPLAY_CACHED_MATCHES", "1e3"),
    (_replay, "FAMIGLIA_REPLAY_CACHED_MB", "0"),
    (_replay, "FAMIGLIA_REPLAY_IMPORTS", "ture"),  # a typo was quietly "off"
    (_projection, "FAMIGLIA_PROJECTION_BATCH", "0"),  # XREADGROUP COUNT 0 reads everything
    (_projection, "FAMIGLIA_PROJECTION_BLOCK_MS", "-5"),
    (_projection, "FAMIGLIA_PROJECTION_BLOCK_MS", "0"),  # a read that never waits: the consumer spun on Redis
    (_projection, "FAMIGLIA_PROJECTION_CLAIM_IDLE_MS", "0"),  # consumers took each other's batches in flight
    (_projection, "FAMIGLIA_PROJECTION_CLAIM_IDLE_MS", "999"),
    (_projection, "FAMIGLIA_PROJECTION_CLAIM_EVERY_S", "inf"),
    (_projection, "FAMIGLIA_PROJECTION_RETRY_MAX_MS", "0"),  # below the first wait (20 ms): no setting
    (_projection, "FAMIGLIA_PROJECTION_CACHE", "big"),
    (_matchmaking, "FAMIGLIA_MM_TICKET_TTL", "0"),  # every ticket expired at once
    (_matchmaking, "FAMIGLIA_MM_TICK", "-0.1"),
    (_matchmaking, "FAMIGLIA_MM_BACKFILL_AFTER", "soon"),
    (_matchmaking, "FAMIGLIA_MM_MATCHER", "of"),  # a typo was quietly "on"
    (_chat, "FAMIGLIA_CHAT_KEEP", "0"),  # XADD MAXLEN ~ 0 would keep (about) nothing
    (_chat, "FAMIGLIA_CHAT_TTL_S", "0"),  # every chat gone as it is sent
    (_chat, "FAMIGLIA_CHAT_RATE", "-1"),
    (_chat, "FAMIGLIA_CHAT_RATE_WINDOW_S", "0"),
    (_registry, "FAMIGLIA_GAMES", "goodcritters,chess"),  # a KeyError traceback: 'chess' (which setting?)
    (_registry, "FAMIGLIA_NP_EXPANSIONS", "/no/such/expansions"),  # served Nothing Personal without its sets
])
def test_a_service_setting_out_of_range_stops_the_process_naming_it(
        monkeypatch: pytest.MonkeyPatch, read: object, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit, match=name):
        read()  # type: ignore[operator]


@pytest.mark.parametrize(("read", "name", "value", "field", "expected"), [
    (_bots, "FAMIGLIA_BOTS_CONCURRENCY", "", "concurrency", 0),  # blank: the default
    (_command_settings, "FAMIGLIA_HOT_MATCHES", " ", "hot_matches", 10_000),
    (_command_settings, "FAMIGLIA_HOT_MATCHES_MB", "1024", "hot_matches_mb", 1024),
    (_command_settings, "FAMIGLIA_TIMEOUTS_TO_BOT", "", "timeouts_to_bot", 3),
    (_command_settings, "FAMIGLIA_TIMEOUTS_TO_BOT", "Off", "timeouts_to_bot", 0),
    (_command_settings, "FAMIGLIA_TIMEOUTS_TO_BOT", "0", "timeouts_to_bot", 0),
    (_command_settings, "FAMIGLIA_TIMEOUTS_TO_BOT", "5", "timeouts_to_bot", 5),
    (_command_settings, "FAMIGLIA_LEAVE_POLICY", " ", "leave_policy", "heuristic"),
    (_command_settings, "FAMIGLIA_LEAVE_POLICY", "random", "leave_policy", "random"),
    (_bots, "FAMIGLIA_BOTS_CLOCK_GRACE", "0", "clock_grace_seconds", 0.0),
    (_bots, "FAMIGLIA_BOTS_POOL", "threads", "pool", "threads"),
    (_replay, "FAMIGLIA_REPLAY_IMPORTS", "OFF", "imports", False),
    (_matchmaking, "FAMIGLIA_MM_MATCHER", "no", "run_matcher", False),
    (_matchmaking, "FAMIGLIA_MM_BACKFILL_AFTER", "0", "policy.backfill_after", 0.0),
    (_chat, "FAMIGLIA_CHAT_RATE", "0", "limits.rate", 0),  # no limit
    (_chat, "FAMIGLIA_CHAT_TTL_S", "86400", "limits.ttl_ms", 86_400_000),
])
def test_a_service_setting_in_range_is_taken(monkeypatch: pytest.MonkeyPatch, read: object, name: str,
                                             value: str, field: str, expected: object) -> None:
    monkeypatch.setenv(name, value)
    got: object = read()  # type: ignore[operator]
    for part in field.split("."):
        got = getattr(got, part)
    assert got == expected


def test_the_command_service_call_threads_default_to_three(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FAMIGLIA_COMMAND_CALL_WORKERS", raising=False)
    assert _command() == 3


@pytest.mark.parametrize(("value", "expected"), [("", 20.0), (" ", 20.0), ("0.5", 0.5), ("120", 120.0)])
def test_the_stuck_call_bound_is_twenty_seconds_unless_set(monkeypatch: pytest.MonkeyPatch, value: str,
                                                           expected: float) -> None:
    monkeypatch.setenv("FAMIGLIA_COMMAND_STUCK_CALL_S", value)
    assert _stuck_call_s() == expected


@pytest.mark.parametrize("url", [
    "redis://:hunter2@redis.internal:6379/0",
    "rediss://famiglia:hunter2@redis.internal:6380/1",
    "unix://famiglia@/run/redis/redis.sock?db=0&password=hunter2",  # redis-py's socket form
    "redis://redis.internal:6379/0?password=hunter2&socket_timeout=5",
    "redis://:hunter2@redis.internal:6379/0?PASSWORD=hunter2",
])
def test_a_url_as_a_log_line_shows_it_has_no_password(url: str) -> None:
    """The start-up lines show FAMIGLIA_REDIS_URL through `shown_url`. redis-py also reads the
    password from the query string (the only place a unix socket URL can carry it), and there it
    was shown as it is."""
    from famiglia.config import shown_url

    shown = shown_url(url)
    assert "hunter2" not in shown
    assert shown.split("://")[0] == url.split("://")[0] and "***" in shown
    assert ("socket_timeout=5" in shown) is ("socket_timeout=5" in url)
    assert shown_url("redis://127.0.0.1:6390/0") == "redis://127.0.0.1:6390/0"


def _log_level(monkeypatch: pytest.MonkeyPatch) -> object:
    import logging

    import structlog

    import famiglia.telemetry as telemetry

    monkeypatch.setattr(telemetry, "_configured", None)
    monkeypatch.setattr(telemetry, "_json_out", telemetry._json_out)
    monkeypatch.setattr(telemetry, "_held", telemetry._held)
    monkeypatch.setattr(telemetry, "_configure_tracing", lambda service: None)
    monkeypatch.setattr(structlog, "configure", lambda **kw: None)
    levels: list[object] = []
    monkeypatch.setattr(logging, "basicConfig", lambda **kw: levels.append(kw["level"]))
    telemetry.configure("review")
    return logging.getLevelName(levels[0])


def _redis_port(monkeypatch: pytest.MonkeyPatch) -> object:
    from famiglia.localstack.stack import _redis_port
    return _redis_port()


def _bot_policy(monkeypatch: pytest.MonkeyPatch) -> object:
    from services.matchmaking.bootstrap import check_bot_policy
    policy = _matchmaking().policy.bot_policy  # type: ignore[attr-defined]
    check_bot_policy(policy)
    return policy


def _projection_group(monkeypatch: pytest.MonkeyPatch) -> object:
    return _projection().runner.group  # type: ignore[attr-defined]


def _redis_url(monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setenv("FAMIGLIA_SECRET", "s")
    for name in ("FAMIGLIA_REDIS_URL", "FAMIGLIA_REDIS_PORT"):
        if os.environ.get(name) != "":  # the other one of the two (the test blanks one): unset
            monkeypatch.delenv(name, raising=False)
    return Settings.from_env().redis_url


def _stack_redis_url(monkeypatch: pytest.MonkeyPatch) -> object:
    from famiglia.localstack.stack import Stack
    return Stack(redis_port=6390).env()["FAMIGLIA_REDIS_URL"]


def _service_name(monkeypatch: pytest.MonkeyPatch) -> object:
    from opentelemetry import trace

    import famiglia.telemetry as telemetry

    providers: list[object] = []
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.setattr(trace, "set_tracer_provider", providers.append)
    telemetry._configure_tracing("review")
    return providers[0].resource.attributes["service.name"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("read", "name", "default"), [
    (_log_level, "FAMIGLIA_LOG_LEVEL", "INFO"),
    (_redis_port, "FAMIGLIA_REDIS_PORT", 6390),
    (_bot_policy, "FAMIGLIA_MM_BOT_POLICY", "heuristic"),
    (_projection_group, "FAMIGLIA_PROJECTION_GROUP", "projection"),
    (_redis_url, "FAMIGLIA_REDIS_URL", "redis://127.0.0.1:6390/0"),
    (_redis_url, "FAMIGLIA_REDIS_PORT", "redis://127.0.0.1:6390/0"),
    (_stack_redis_url, "FAMIGLIA_REDIS_URL", "redis://127.0.0.1:6390/0"),
    (_service_name, "OTEL_SERVICE_NAME", "famiglia-review"),
])
def test_a_blank_setting_means_its_default(monkeypatch: pytest.MonkeyPatch, read: object, name: str,
                                           default: object) -> None:
    """README, Configuration: "a blank value means the default" (a manifest's `NAME: ""`, a
    compose `${NAME:-}`). The checked readers do so, but these settings, read elsewhere, took the
    blank as a value: FAMIGLIA_LOG_LEVEL="" stopped every service, FAMIGLIA_MM_BOT_POLICY=""
    stopped the matchmaker, FAMIGLIA_REDIS_PORT="" stopped `make up`, a blank group was a
    consumer group named "". A blank FAMIGLIA_REDIS_URL was the URL "" to every service and
    every process `make up` starts; a blank FAMIGLIA_REDIS_PORT made the services' URL
    `redis://127.0.0.1:/0`, which redis-py reads as port 6379 while the embedded stack's Redis
    listens on 6390; a blank OTEL_SERVICE_NAME named every span's service ""."""
    monkeypatch.setenv(name, "")
    assert read(monkeypatch) == default  # type: ignore[operator]


def test_a_blank_database_url_stops_the_projection_naming_it(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    """Blank FAMIGLIA_DATABASE_URL is no read models (README): the services that only read them
    run without. The projection, which writes them, stopped with SQLAlchemy's "Could not parse
    SQLAlchemy URL from given URL string", naming no setting."""
    from services.projection.bootstrap import bootstrap

    monkeypatch.setenv("FAMIGLIA_VAR_DIR", str(tmp_path))
    monkeypatch.setenv("FAMIGLIA_SECRET", "s")
    monkeypatch.setenv("FAMIGLIA_REDIS_URL", "redis://127.0.0.1:1/0")  # never reached
    monkeypatch.setenv("FAMIGLIA_DATABASE_URL", " ")
    assert Settings.from_env().database_url == ""
    with pytest.raises(SystemExit, match="FAMIGLIA_DATABASE_URL"):
        bootstrap()
