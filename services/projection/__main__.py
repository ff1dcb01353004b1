"""`python -m services.projection [run]`: consume into the read models and serve QueryService
until SIGTERM/SIGINT. `... rebuild`: rebuild every read model from the archive and the streams.
`... migrate`: bring the schema to head and exit."""

from __future__ import annotations

import argparse
import logging
import sys
import threading

from famiglia.config import Settings, listen_address
from famiglia.grpcutil.lifecycle import stop_on_signals
from famiglia.telemetry import configure, get_logger

from .bootstrap import bootstrap
from .entrypoints.grpc_server import serve
from .metrics import configure_metrics


def run(settings: Settings) -> int:
    app = bootstrap(settings=settings)
    server, port = serve(app.sql, listen_address(settings.projection_addr), min(settings.grpc_workers, 32))
    server.start()
    runner = app.runner()
    log = get_logger()
    log.info("projection_service_started", port=port, consumer=runner.name, group=runner.config.group,
             database=app.sql.url.render_as_string(hide_password=True), redis=settings.redis_url)
    stop = stop_on_signals()
    consumer = threading.Thread(target=runner.run, args=(stop,), name="projection-consumer", daemon=True)
    consumer.start()
    stop.wait()
    consumer.join(timeout=15)
    server.stop(grace=5).wait()
    app.close()
    return 0


def cmd_rebuild(settings: Settings) -> int:
    app = bootstrap(settings=settings)
    try:
        report = app.rebuild()
    finally:
        app.close()
    print(f"rebuilt from {report.archived} archived events and {report.entries} stream entries: "
          f"{report.applied} events projected, "
          f"{report.matches_finished} matches finished"
          + (f", {report.left_deferred} entries after gaps NOT projected" if report.left_deferred else ""))
    return 0 if not report.left_deferred else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.projection", description=__doc__)
    sub = parser.add_subparsers(dest="cmd")
    sub.add_parser("run", help="consume and serve QueryService (the default)")
    sub.add_parser("rebuild", help="rebuild every read model from the archive and the streams")
    sub.add_parser("migrate", help="bring the schema to head and exit")
    args = parser.parse_args(argv)
    configure("projection")
    configure_metrics("projection")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    settings = Settings.from_env()
    if args.cmd == "rebuild":
        return cmd_rebuild(settings)
    if args.cmd == "migrate":
        bootstrap(settings=settings).close()
        return 0
    return run(settings)


if __name__ == "__main__":
    sys.exit(main())
