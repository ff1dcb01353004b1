"""`python -m services.command`: run the command service until SIGTERM/SIGINT."""

from __future__ import annotations

from famiglia.config import Settings, listen_address, shown_url, whole
from famiglia.grpcutil.lifecycle import await_stop, drained, service_arguments, stop_on_signals
from famiglia.grpcutil.readiness import redis_ping
from famiglia.grpcutil.tls import exit_on_bad_setting, transport
from famiglia.telemetry import configure, get_logger
from famiglia.telemetry.metrics import configure_metrics

from .bootstrap import bootstrap
from .entrypoints.grpc_server import CALL_WORKERS, serve


def call_workers() -> int:
    """Threads for unary calls (FAMIGLIA_COMMAND_CALL_WORKERS, at least 1)."""
    return whole("FAMIGLIA_COMMAND_CALL_WORKERS", CALL_WORKERS)


def main() -> None:
    service_arguments("python -m services.command", __doc__)
    configure("command")
    configure_metrics("command")
    settings = Settings.from_env()
    with exit_on_bad_setting():  # a bad TLS setting stops the service before anything connects
        serving = transport()
    app = bootstrap(settings=settings)
    server, port = serve(app, listen_address(settings.command_addr), settings.grpc_workers,
                         call_workers=call_workers(), dependencies=[redis_ping(settings.redis_url)], transport=serving)
    server.start()
    get_logger().info("command_service_started", port=port, tls=serving.shown, redis=shown_url(settings.redis_url))
    since = await_stop(stop_on_signals(), "command")
    server.stop(grace=5).wait()
    app.store.close()
    drained("command", since)


if __name__ == "__main__":
    main()
