"""`python -m services.command`: run the command service until SIGTERM/SIGINT."""

from __future__ import annotations

import threading

from famiglia.config import Settings, listen_address, number, shown_url, whole
from famiglia.grpcutil.lifecycle import (
    await_stop,
    drained,
    exit_unbound,
    leave_if_calls_run,
    service_arguments,
    stop_on_signals,
)
from famiglia.grpcutil.readiness import redis_primary
from famiglia.grpcutil.tls import exit_on_bad_setting, transport
from famiglia.telemetry import configure, get_logger
from famiglia.telemetry.metrics import configure_metrics

from .app import CommandApp
from .bootstrap import bootstrap
from .entrypoints.grpc_server import CALL_WORKERS, STUCK_CALL_S, serve
from .rematch import REMATCH_SWEEP_S

ADDRESS = "FAMIGLIA_COMMAND_ADDR"


def call_workers() -> int:
    """Threads for unary calls (FAMIGLIA_COMMAND_CALL_WORKERS, at least 1)."""
    return whole("FAMIGLIA_COMMAND_CALL_WORKERS", CALL_WORKERS)


def stuck_call_s() -> float:
    """Seconds a unary call may run before the watchdog takes it for stuck and health turns
    NOT_SERVING (FAMIGLIA_COMMAND_STUCK_CALL_S, more than 0; docs/operations.md)."""
    return number("FAMIGLIA_COMMAND_STUCK_CALL_S", STUCK_CALL_S, above=True)


def sweep_rematches(app: CommandApp, stop: threading.Event, every_s: float = REMATCH_SWEEP_S) -> None:
    """Until `stop`: make the rematches whose creation was lost, every `every_s` (each replica
    does: a creation is idempotent). Redis away for a round: the next round tries again."""
    while not stop.wait(every_s):
        try:
            app.finish_rematches()
        except Exception:  # noqa: BLE001 -- the pending creations stay for the next round
            get_logger().exception("rematch_sweep_failed")


def main() -> None:
    service_arguments("python -m services.command", __doc__)
    configure("command")
    configure_metrics("command")
    settings = Settings.from_env()
    address = listen_address(settings.command_addr, ADDRESS)
    threads, stuck_after = call_workers(), stuck_call_s()  # a bad value stops the service before it connects
    with exit_on_bad_setting():  # a bad TLS setting stops the service before anything connects
        serving = transport()
    app = bootstrap(settings=settings)
    with exit_unbound(ADDRESS, settings.command_addr):
        server, port = serve(app, address, settings.grpc_workers, call_workers=threads,
                             dependencies=[redis_primary(settings.redis_url)], transport=serving,
                             stuck_call_s=stuck_after)
    server.start()
    sweeping = threading.Event()
    sweeper = threading.Thread(target=sweep_rematches, args=(app, sweeping), name="rematch-sweep", daemon=True)
    sweeper.start()
    get_logger().info("command_service_started", port=port, tls=serving.shown, redis=shown_url(settings.redis_url))
    since = await_stop(stop_on_signals(), "command")
    sweeping.set()
    server.stop(grace=5).wait()
    sweeper.join(timeout=5)  # a round in progress ends before the store closes under it (bounded: Redis may hang)
    app.close()  # the store, and the quarantine's own connections
    leave_if_calls_run(server, "command", since)  # calls still running: leaves now (a stuck one: status 1)
    drained("command", since)


if __name__ == "__main__":
    main()
