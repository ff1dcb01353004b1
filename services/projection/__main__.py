"""`python -m services.projection [run]`: consume into the read models and serve QueryService
until SIGTERM/SIGINT. `... rebuild`: rebuild every read model from the archive and the streams.
`... migrate`: bring the schema to head and exit. `... parked` / `... unpark MATCH_ID...`: list the
matches the projection gave up on (poison entries) / project them again after a fix. `... diverged`:
list the matches whose event store lost acknowledged writes and was written on since (a rebuild
takes them from the store)."""

from __future__ import annotations

import argparse
import logging
import sys
import threading

import redis

from famiglia.config import Settings, listen_address, shown_url
from famiglia.grpcutil.lifecycle import await_stop, drained, exit_unbound, stop_on_signals
from famiglia.grpcutil.readiness import sql_select_one
from famiglia.grpcutil.tls import exit_on_bad_setting, transport
from famiglia.telemetry import configure, get_logger
from famiglia.telemetry.metrics import configure_metrics

from .bootstrap import bootstrap
from .entrypoints.grpc_server import serve


def run(settings: Settings) -> int:
    address = listen_address(settings.projection_addr, "FAMIGLIA_PROJECTION_ADDR")
    with exit_on_bad_setting():  # a bad TLS setting stops the service before anything connects
        serving = transport()
    app = bootstrap(settings=settings)
    # QueryService answers from the read models alone: with Redis away they are only behind
    # (the consumer retries, logging `projection_round_failed`), so Redis takes no replica out of service.
    with exit_unbound("FAMIGLIA_PROJECTION_ADDR", settings.projection_addr):
        server, port = serve(app.sql, address, min(settings.grpc_workers, 32), registry=app.registry,
                             dependencies=[sql_select_one(settings.database_url)], transport=serving)
    server.start()
    runner = app.runner()
    log = get_logger()
    log.info("projection_service_started", port=port, tls=serving.shown, consumer=runner.name, group=runner.config.group,
             database=app.sql.url.render_as_string(hide_password=True), redis=shown_url(settings.redis_url))
    stop = stop_on_signals()
    consumer = threading.Thread(target=runner.run, args=(stop,), name="projection-consumer", daemon=True)
    consumer.start()
    since = await_stop(stop, "projection")
    consumer.join(timeout=15)
    server.stop(grace=5).wait()
    app.close()
    drained("projection", since)
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
          + (f", {report.left_deferred} entries after gaps NOT projected" if report.left_deferred else "")
          + (f", {report.parked} entries of poison matches parked (see the log and `parked`)" if report.parked else "")
          + (f", {report.diverged} diverged matches taken from the store" if report.diverged else "")
          + (f", {report.flagged} matches still flagged diverged (`diverged` lists them)" if report.flagged else "")
          + (f", {report.unreadable} partition entries no event could be read from gone past"
             " (see the log and the dead letters)"
             if report.unreadable else "")
          + (f", {report.unrecorded} parked or unreadable entries NOT recorded in the dead letters (Redis"
             " refused them: rebuild again once it takes writes)" if report.unrecorded else ""))
    return 0 if not (report.left_deferred or report.parked or report.flagged or report.unrecorded) else 1


def cmd_unpark(settings: Settings, match_ids: list[str]) -> int:
    """Forget the dead-letter record of each match and project it from its own stream."""
    app = bootstrap(settings=settings)
    failed = 0
    try:
        for match_id in match_ids:
            outcome = app.unpark(match_id)
            if outcome.parked or outcome.deferred:
                failed += 1
                print(f"{match_id}: still not projectable ({len(outcome.parked)} entries parked again)")
            else:
                print(f"{match_id}: {len(outcome.applied)} events projected, {len(outcome.skipped)} already there")
    finally:
        app.close()
    return 1 if failed else 0


def cmd_parked(settings: Settings) -> int:
    app = bootstrap(settings=settings)
    try:
        for match_id, record in sorted(app.dead_letters().records().items()):
            print(f"{match_id}  seq {record.get('seq')}  {record.get('event_id')}  {record.get('reason')}")
    finally:
        app.close()
    return 0


def cmd_diverged(settings: Settings) -> int:
    """The flagged matches, with the store's version beside the projected one."""
    app = bootstrap(settings=settings)
    try:
        found = app.diverged()
        for match in found:
            print(f"{match.match_id}  {match.status}  differs from seq {match.diverged_seq}  "
                  f"projected version {match.version}  store version {app.store.version(match.match_id)}")
        if found:
            print(f"{len(found)} matches: the event store lost acknowledged writes and was written on since; "
                  "their streams are kept. `python -m services.projection rebuild` takes them from the store.")
    finally:
        app.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.projection", description=__doc__)
    sub = parser.add_subparsers(dest="cmd")
    sub.add_parser("run", help="consume and serve QueryService (the default)")
    sub.add_parser("rebuild", help="rebuild every read model from the archive and the streams")
    sub.add_parser("migrate", help="bring the schema to head and exit")
    sub.add_parser("parked", help="list the matches the projection parked (poison entries)")
    unpark = sub.add_parser("unpark", help="project parked matches again from their streams (after a fix)")
    unpark.add_argument("match_ids", nargs="+", metavar="MATCH_ID")
    sub.add_parser("diverged", help="list the matches whose event store went back and was written on (rebuild them)")
    args = parser.parse_args(argv)
    configure("projection")
    configure_metrics("projection")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    settings = Settings.from_env()
    try:
        if args.cmd == "rebuild":
            return cmd_rebuild(settings)
        if args.cmd == "parked":
            return cmd_parked(settings)
        if args.cmd == "diverged":
            return cmd_diverged(settings)
        if args.cmd == "unpark":
            return cmd_unpark(settings, args.match_ids)
        if args.cmd == "migrate":
            bootstrap(settings=settings).close()
            return 0
    except redis.exceptions.ConnectionError as exc:  # an operator's command: one line, not a traceback
        print(f"cannot reach Redis at {shown_url(settings.redis_url)}: {exc} (is the stack up? `make up`)",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C (`famiglia projection ...` passes it on): one line too
        print(f"{args.cmd} interrupted", file=sys.stderr)
        return 130
    return run(settings)


if __name__ == "__main__":
    sys.exit(main())
