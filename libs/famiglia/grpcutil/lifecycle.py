"""How every service process stops: SIGTERM or SIGINT sets one event that the gRPC
server and the background loops all watch."""

from __future__ import annotations

import signal
import threading
import time


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


def service_arguments(prog: str, description: str | None, argv: list[str] | None = None) -> None:
    """A service takes no arguments, only its environment: `--help` says so (and exits) rather
    than starting the server, and anything else is refused."""
    import argparse

    parser = argparse.ArgumentParser(
        prog=prog, description=description,
        epilog="Configured by environment variables (FAMIGLIA_*; the README's Configuration table); "
               "runs until SIGTERM or SIGINT.")
    parser.parse_args(argv)
