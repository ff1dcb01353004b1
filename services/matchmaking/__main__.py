"""`python -m services.matchmaking`: the gRPC server and the matcher loop, until SIGTERM/SIGINT."""

from __future__ import annotations

import threading

from famiglia.config import Settings, listen_address, shown_url
from famiglia.grpcutil.lifecycle import await_stop, drained, exit_unbound, service_arguments, stop_on_signals
from famiglia.grpcutil.readiness import redis_primary
from famiglia.grpcutil.tls import exit_on_bad_setting, plaintext_peers, transport
from famiglia.telemetry import configure, get_logger
from famiglia.telemetry.metrics import configure_metrics

from .bootstrap import bootstrap
from .entrypoints.grpc_server import serve


def main() -> None:
    service_arguments("python -m services.matchmaking", __doc__)
    configure("matchmaking")
    configure_metrics("matchmaking")
    settings = Settings.from_env()
    address = listen_address(settings.matchmaking_addr, "FAMIGLIA_MATCHMAKING_ADDR")
    with exit_on_bad_setting():  # a bad TLS setting stops the service before anything connects
        serving = transport()
        mm = bootstrap(settings=settings)  # its CreateMatch client checks FAMIGLIA_TLS_CA now
    plaintext_peers({"FAMIGLIA_COMMAND_ADDR": settings.command_addr})
    # Ratings read the database when there is one, but fall back to the default without it.
    with exit_unbound("FAMIGLIA_MATCHMAKING_ADDR", settings.matchmaking_addr):
        server, port = serve(mm.app, address, settings.grpc_workers, dependencies=[redis_primary(settings.redis_url)],
                             transport=serving)
    server.start()
    stop = stop_on_signals()
    loop = None
    if mm.settings.run_matcher:
        loop = threading.Thread(target=mm.matcher.run, args=(stop,), name="matcher", daemon=True)
        loop.start()
    get_logger().info("matchmaking_service_started", port=port, tls=serving.shown, redis=shown_url(settings.redis_url),
                      games=sorted(mm.app.games), matcher=mm.settings.run_matcher)
    since = await_stop(stop, "matchmaking")
    server.stop(grace=5).wait()
    if loop is not None:
        loop.join(timeout=10)
    mm.close()
    drained("matchmaking", since)


if __name__ == "__main__":
    main()
