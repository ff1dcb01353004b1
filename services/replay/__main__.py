"""`python -m services.replay`: run the replay service until SIGTERM/SIGINT."""

from __future__ import annotations

from famiglia.config import Settings, listen_address, number, shown_url
from famiglia.grpcutil.lifecycle import (
    await_stop,
    drained,
    exit_unbound,
    leave_if_calls_run,
    service_arguments,
    stop_on_signals,
)
from famiglia.grpcutil.readiness import redis_ping
from famiglia.grpcutil.tls import exit_on_bad_setting, transport
from famiglia.telemetry import configure, get_logger
from famiglia.telemetry.metrics import configure_metrics

from .bootstrap import bootstrap
from .entrypoints.grpc_server import STUCK_CALL_S, serve


def stuck_call_s() -> float:
    """Seconds a unary call may run before the watchdog takes it for stuck and health turns
    NOT_SERVING (FAMIGLIA_REPLAY_STUCK_CALL_S, more than 0; docs/operations.md)."""
    return number("FAMIGLIA_REPLAY_STUCK_CALL_S", STUCK_CALL_S, above=True)


def main() -> None:
    service_arguments("python -m services.replay", __doc__)
    configure("replay")
    configure_metrics("replay")
    settings = Settings.from_env()
    address = listen_address(settings.replay_addr, "FAMIGLIA_REPLAY_ADDR")
    stuck_after = stuck_call_s()  # a bad value stops the service before it connects
    with exit_on_bad_setting():  # a bad TLS setting stops the service before anything connects
        serving = transport()
    app = bootstrap(settings=settings)
    # The archive (SQL) serves only matches gone from Redis: while away, those are UNAVAILABLE.
    # PING, not `redis_primary`: its calls read, which a replica serves (after a failover, the
    # demoted node replicates the new primary); only an import writes, refused UNAVAILABLE then.
    with exit_unbound("FAMIGLIA_REPLAY_ADDR", settings.replay_addr):
        server, port = serve(app, address, settings.grpc_workers, dependencies=[redis_ping(settings.redis_url)],
                             transport=serving, stuck_call_s=stuck_after)
    server.start()
    get_logger().info("replay_service_started", port=port, tls=serving.shown, redis=shown_url(settings.redis_url))
    since = await_stop(stop_on_signals(), "replay")
    server.stop(grace=5).wait()
    app.close()
    leave_if_calls_run(server, "replay", since)  # calls still running: leaves now (a stuck one: status 1)
    drained("replay", since)


if __name__ == "__main__":
    main()
