"""`python -m services.command`: run the command service until SIGTERM/SIGINT."""

from __future__ import annotations

import os

from famiglia.config import Settings, listen_address, shown_url
from famiglia.grpcutil.lifecycle import service_arguments, stop_on_signals
from famiglia.telemetry import configure, get_logger

from .bootstrap import bootstrap
from .entrypoints.grpc_server import CALL_WORKERS, serve


def main() -> None:
    service_arguments("python -m services.command", __doc__)
    configure("command")
    settings = Settings.from_env()
    app = bootstrap(settings=settings)
    server, port = serve(app, listen_address(settings.command_addr), settings.grpc_workers,
                         call_workers=int(os.environ.get("FAMIGLIA_COMMAND_CALL_WORKERS", CALL_WORKERS)))
    server.start()
    get_logger().info("command_service_started", port=port, redis=shown_url(settings.redis_url))
    stop = stop_on_signals()
    stop.wait()
    server.stop(grace=5).wait()
    app.store.close()


if __name__ == "__main__":
    main()
