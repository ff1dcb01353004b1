"""`python -m services.bots`: TournamentService, the dispatcher and the tournament
runner in one process, until SIGTERM/SIGINT. The Celery workers run apart
(`python -m services.bots.worker`)."""

from __future__ import annotations

import functools
import socket
import threading

import redis

from famiglia.config import listen_address
from famiglia.eventstore.consumer import PartitionConsumer
from famiglia.eventstore.turn_notices import turn_notices_of
from famiglia.grpcutil.errors import store_away, store_refusing
from famiglia.grpcutil.lifecycle import await_stop, drained, exit_unbound, service_arguments, stop_on_signals
from famiglia.grpcutil.readiness import redis_primary
from famiglia.grpcutil.tls import exit_on_bad_setting, plaintext_peers, transport
from famiglia.replay.sources import sql_archive_source
from famiglia.telemetry import configure, get_logger
from famiglia.telemetry.metrics import configure_metrics

from .bootstrap import BotsApp, bootstrap
from .dispatcher import GROUP, Dispatcher
from .entrypoints.celery_app import CeleryTasks
from .entrypoints.grpc_server import serve
from .metrics import group_backlog
from .tournaments import ReadModelLog, TournamentObserver, TournamentRepo, TournamentRunner


def start_background(app: BotsApp, stop: threading.Event, *, block_ms: int = 500) -> list[threading.Thread]:
    """The dispatcher and the tournament runner as daemon threads (tests use this too)."""
    store = app.store
    metrics = app.metrics
    repo = TournamentRepo(store.client)  # type: ignore[attr-defined]
    runner = TournamentRunner(repo, app.game_client, store, read_model=ReadModelLog(app.settings.database_url),
                              secret=app.settings.secret, accepted_secret=app.settings.accepted_secret,
                              metrics=metrics)
    archive = sql_archive_source(app.settings.database_url) if app.settings.database_url else None
    dispatcher = Dispatcher(store, app.registry, CeleryTasks(app.celery, metrics),
                            observer=TournamentObserver(repo, on_finished=runner.wake.set, metrics=metrics),
                            stall_seconds=app.bots.stall_seconds,
                            clock_grace_seconds=app.bots.clock_grace_seconds,
                            seats_per_task=app.bots.seats_per_task, lease_moves=app.bots.lease_moves,
                            archive=archive.read if archive is not None else None,
                            notices=turn_notices_of(store) if app.bots.turn_notifications else None,
                            metrics=metrics)
    consumer = PartitionConsumer.for_store(store, GROUP, f"dispatcher-{socket.gethostname()}")  # type: ignore[arg-type]
    # A new group starts at the end: matches created before the bots service ever ran are not its business.
    grouped = _ensure_groups(consumer)
    if metrics is not None:  # the group's backlog, read when the metrics are exported
        streams = store.keys.partition_streams()  # type: ignore[attr-defined]
        metrics.watch_backlog(functools.partial(group_backlog, store.client, streams, GROUP))  # type: ignore[attr-defined]
    threads = [
        threading.Thread(target=_dispatch, args=(dispatcher, consumer, stop, grouped, block_ms),
                         name="bots-dispatcher", daemon=True),
        threading.Thread(target=runner.run, args=(stop,), name="bots-tournaments", daemon=True),
    ]
    for t in threads:
        t.start()
    return threads


def _ensure_groups(consumer: PartitionConsumer) -> bool:
    """The dispatcher's group on every partition, from the end of history; False while Redis is
    away or refusing the write for now (`store_away`; the dispatcher's thread makes it once Redis
    takes it, `_dispatch`): the service starts as the others do, rather than exiting in a
    traceback (as it did on a refusal: a replica's READONLY, MISCONF)."""
    try:
        consumer.ensure_groups(start_id="$")
    except Exception as exc:
        if not store_away(exc):
            raise
        if store_refusing(exc):
            _refused(exc)
        else:
            get_logger().warning("dispatcher_waiting_for_redis", error=f"{type(exc).__name__}: {exc}")
        return False
    return True


def _refused(exc: Exception, **fields: object) -> None:
    """Redis answers but refuses the group's write (MISCONF: its disk full; READONLY, a replica,
    which readiness tells too): readiness passes a MISCONF, so this line is then the one sign that
    the dispatcher does not run."""
    get_logger().warning("dispatcher_group_refused", error=f"{type(exc).__name__}: {exc}"[:300], **fields)


def _dispatch(dispatcher: Dispatcher, consumer: PartitionConsumer, stop: threading.Event, grouped: bool,
              block_ms: int) -> None:
    """The dispatcher, once its group is made (`grouped`: at start already). Tried again until it
    is, or the service stops: Redis away, or back and refusing the write for a while (MISCONF, its
    disk full), on which this thread once ended and left the service serving with no dispatcher."""
    pause = 0.5
    while not grouped and not stop.wait(pause):
        pause = min(pause * 2, 5.0)
        try:
            consumer.ensure_groups(start_id="$")
            grouped = True
        except Exception as exc:
            if store_away(exc) and not store_refusing(exc):
                continue  # out of reach: readiness says so (`dependency_down`), once
            if not isinstance(exc, redis.exceptions.RedisError):
                raise
            _refused(exc, pause_s=pause)  # refusing for now, or another reply error: tried again
    if grouped:
        dispatcher.run(consumer, stop, block_ms=block_ms)


def main() -> None:
    service_arguments("python -m services.bots", __doc__)
    configure("bots")
    configure_metrics("bots")
    with exit_on_bad_setting():  # a bad TLS setting stops the service before anything connects
        serving = transport()
        app = bootstrap()
    address = listen_address(app.settings.bots_addr, "FAMIGLIA_BOTS_ADDR")
    plaintext_peers({"FAMIGLIA_COMMAND_ADDR": app.settings.command_addr})
    repo = TournamentRepo(app.store.client)  # type: ignore[attr-defined]
    # The tournament log in SQL is best effort (ReadModelLog): only Redis takes calls out of service.
    with exit_unbound("FAMIGLIA_BOTS_ADDR", app.settings.bots_addr):
        server, port = serve(repo, app.registry, address, signer=app.signer,
                             dependencies=[redis_primary(app.settings.redis_url)], transport=serving)
    server.start()
    stop = threading.Event()
    threads = start_background(app, stop)
    get_logger().info("bots_service_started", port=port, tls=serving.shown, games=list(app.registry))
    since = await_stop(stop_on_signals(stop), "bots")
    server.stop(grace=3).wait()
    for t in threads:
        t.join(timeout=5)
    app.close()
    drained("bots", since)


if __name__ == "__main__":
    main()
