"""How every service process stops: SIGTERM or SIGINT sets one event that the gRPC
server and the background loops all watch."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn


def stop_on_signals(stop: threading.Event | None = None) -> threading.Event:
    """An event set by SIGTERM/SIGINT (call from the main thread)."""
    stop = stop or threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def await_stop(stop: threading.Event, service: str) -> float:
    """Block until the stop signal, then say the drain began (`<service>_service_stopping`): an
    operator draining a replica reads when it was asked to go and (`drained`) when it went.
    The time the drain began, for `drained`."""
    stop.wait()
    from famiglia.telemetry import get_logger

    get_logger().info(f"{service}_service_stopping")
    return time.monotonic()


def drained(service: str, since: float) -> None:
    """The last line of a service that stopped as asked (`<service>_service_stopped`)."""
    from famiglia.telemetry import get_logger

    get_logger().info(f"{service}_service_stopped", drain_s=round(time.monotonic() - since, 3))


def leave_if_calls_run(server: Any, service: str, since: float) -> None:
    """After the drain (`server.stop(grace).wait()`): with unary calls of `server` still
    running (its stuck-call watchdog counts them), leave now, by `os._exit` (`leave_running`);
    with none, return (the service says `drained` and ends as usual)."""
    watchdog = getattr(server, "watchdog", None)
    if watchdog is not None and (calls := watchdog.under_way()):
        leave_running(service, calls, watchdog.overdue(), since)


def leave_running(service: str, calls: int, stuck: int, since: float) -> NoReturn:
    """Leave now, with `calls` unary calls still running after the drain: a thread cannot be
    stopped, and the interpreter's exit would wait for the call threads (for ever, for a stuck
    one: until the orchestrator's SIGKILL). Their clients were cut off at the grace and retry
    elsewhere; a command's events are appended whole or not at all. `stuck` of them ran past the
    watchdog's bound: a process that stopped stuck (`<service>_service_stopped_stuck`, error,
    status 1). None did: slow calls the grace did not wait for, a stop as any other
    (`calls_cut_at_stop`, warning, then `<service>_service_stopped`, status 0). `os._exit` runs no
    atexit hook: the spans still queued and the metrics' last interval are sent first (each
    bounded, so a collector away does not hold the exit)."""
    from famiglia.telemetry import flush_spans, get_logger
    from famiglia.telemetry.metrics import shutdown_metrics

    if stuck:
        get_logger().error(f"{service}_service_stopped_stuck", calls=calls, stuck=stuck,
                           drain_s=round(time.monotonic() - since, 3))
    else:
        get_logger().warning("calls_cut_at_stop", calls=calls, drain_s=round(time.monotonic() - since, 3))
        drained(service, since)
    flush_spans()
    shutdown_metrics()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1 if stuck else 0)


def service_arguments(prog: str, description: str | None, argv: list[str] | None = None) -> None:
    """A service takes no arguments, only its environment: `--help` says so (and exits) rather
    than starting the server, and anything else is refused."""
    import argparse

    parser = argparse.ArgumentParser(
        prog=prog, description=description,
        epilog="Configured by environment variables (FAMIGLIA_*; the README's Configuration table); "
               "runs until SIGTERM or SIGINT.")
    parser.parse_args(argv)


@contextmanager
def exit_unbound(name: str, address: str) -> Iterator[None]:
    """Where a service binds its port: one it cannot listen on stops it with one line naming the
    setting (`name`, given as `address`), or FAMIGLIA_HEALTH_ADDR's, not gRPC's traceback."""
    from .server import BindError

    try:
        yield
    except BindError as exc:
        said = f"{exc.setting}={exc.address!r}" if exc.setting else f"{name}={address!r}"
        port = exc.address.rpartition(":")[2]
        # grpcs://HOST alone is port 443, and the image runs as a user (deploy/Dockerfile)
        barred = ("; or a port below 1024, which this user may not take (set one, or grant "
                  "CAP_NET_BIND_SERVICE)") if port.isdigit() and 0 < int(port) < 1024 and _unprivileged() else ""
        raise SystemExit(f"{said}: cannot listen there (the port is taken: another process, or a closed "
                         f"connection's TIME_WAIT; or the host is not this machine's{barred})") from None


def _unprivileged() -> bool:
    """Whether this process runs as a user other than root (who may bind any port)."""
    geteuid = getattr(os, "geteuid", None)  # (not on Windows)
    return geteuid is not None and geteuid() != 0
