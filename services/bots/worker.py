"""`python -m services.bots.worker`: real `celery worker`s for bot decisions and clocks.

One worker process per core by default (FAMIGLIA_BOTS_CONCURRENCY): search
policies are CPU-bound, so threads would share one core under the GIL. Within
each process, FAMIGLIA_BOTS_THREADS_PER_WORKER (default 2) decisions at once, so
one decision's SubmitCommand round trip overlaps another's choice.

Pools (FAMIGLIA_BOTS_POOL):

- `solo` (default): this process forks one `celery worker` per core and keeps
  them running (a child that dies is started again, and one whose supervisor dies
  stops, finishing its task: `stop_with_parent`); each runs `-P solo`, or
  `-P threads` with FAMIGLIA_BOTS_THREADS_PER_WORKER > 1 (the default, 2). Each child takes a
  task from Redis and plays it itself, so a decision costs no hand-over between
  a consumer process and a pool process (the prefork pool pickles every task and
  its outcome through a pipe; for `random` and `heuristic` seats that was more
  CPU than the decision). A child killed mid-task leaves its task unacked; Redis
  gives it to another child after the visibility timeout, and the dispatcher
  queues the decision again after its stall time, whichever comes first. Solo
  workers enforce no hard time limit: a policy past its decision's deadline
  answers with its best so far, and one still running near
  FAMIGLIA_BOTS_TASK_TIME_LIMIT is interrupted by the process's watchdog and the
  seat plays `random` instead (handlers.time_limit; it works in pool threads too,
  so FAMIGLIA_BOTS_THREADS_PER_WORKER > 1 keeps it).
- `prefork`: one Celery worker with a prefork pool of `concurrency` processes.
- `threads`: one Celery worker with `concurrency` threads (tests).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable

from famiglia.engine.registry import Registry
from famiglia.grpcutil.tls import exit_on_bad_setting, plaintext_peers
from famiglia.telemetry import configure, flush_spans, get_logger
from famiglia.telemetry.metrics import configure_metrics, shutdown_metrics

from .bootstrap import BotsApp, BotsSettings, bootstrap
from .entrypoints.celery_app import CLOCKS_QUEUE, DECISIONS_QUEUE

log = get_logger("famiglia.bots.worker")

# Celery's own line per task ("received", "succeeded") at INFO: two log records per
# decision, more CPU than a random choice. Our `bot_decision` line stays; Celery's
# warnings and errors (a failed or retried task) still show.
QUIET_LOGGERS = ("celery.app.trace", "celery.worker.strategy", "celery.worker.request")


def worker_argv(pool: str, concurrency: int, loglevel: str = "INFO", name: str = "") -> list[str]:
    """`celery` arguments: `--quiet` leaves out its start-up banner, twenty lines of plain text
    on stdout among the JSON lines (`bots_workers_started` says the pool and processes)."""
    return [
        "--quiet", "worker", "-P", pool, "-c", str(concurrency), "-Q", f"{DECISIONS_QUEUE},{CLOCKS_QUEUE}",
        "-n", f"{name or f'bots-{os.getpid()}'}@{socket.gethostname()}", "--loglevel", loglevel,
        "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]


def layout(bots: BotsSettings) -> tuple[int, str, int]:
    """(Celery worker processes, each one's pool, its concurrency). With `solo`, one process per
    worker, each a solo worker or a `threads` pool of FAMIGLIA_BOTS_THREADS_PER_WORKER, also when
    there is one process (a container given one core: FAMIGLIA_BOTS_CONCURRENCY=1), which once
    ran a plain solo worker and so one decision at a time; otherwise one worker of that pool."""
    if bots.pool == "solo":
        threads = bots.threads_per_worker
        return bots.workers, "solo" if threads <= 1 else "threads", max(1, threads)
    return 1, bots.pool, bots.workers


def quiet_celery_task_logs() -> None:
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def plain_stdout_away() -> None:
    """Celery writes a few notes straight to the stdout file descriptor, not through logging
    (`worker: Warm shutdown (MainProcess)` on SIGTERM): plain text among the JSON lines a log
    collector reads. Unless stdout is a terminal, it goes to /dev/null (nothing of famiglia's
    writes there: its lines are on stderr), and `bots_worker_stopping` says the shutdown."""
    if sys.stdout is None or sys.stdout.isatty():
        return
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
    finally:
        os.close(devnull)


def _say_shutdown(sender: object = None, sig: object = None, how: object = None, exitcode: object = None,
                  **_kwargs: object) -> None:
    log.info("bots_worker_stopping", worker=str(sender), signal=str(sig), how=str(how))


def _run_celery(app: BotsApp, pool: str, concurrency: int, extra: list[str], name: str = "") -> None:
    from celery import signals

    quiet_celery_task_logs()
    plain_stdout_away()
    signals.worker_shutting_down.connect(_say_shutdown, weak=False, dispatch_uid="famiglia-bots-worker-stopping")
    app.celery.worker_main(worker_argv(pool, concurrency, app.settings.log_level.upper(), name) + extra)


def stop_with_parent(parent: int) -> None:
    """SIGTERM to this process when `parent` dies (Linux; elsewhere nothing): a solo worker whose
    supervisor was killed (kill -9, the OOM killer) would go on as an orphan that neither `make
    down` (it signals the recorded supervisor's group) nor a container runtime watching the
    supervisor stops, beside the workers of the supervisor started in its place. SIGTERM is
    Celery's warm shutdown: the task at hand is finished first."""
    if not sys.platform.startswith("linux") or os.getpid() == parent:  # not a child of `parent`
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != parent:  # it died before the line above: no signal will come
        os.kill(os.getpid(), signal.SIGTERM)


def _fork_solo(app: BotsApp, index: int, extra: list[str]) -> int:
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: a whole Celery worker of its own
        code = 0
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            stop_with_parent(parent)
            _processes, pool, concurrency = layout(app.bots)
            _run_celery(app, pool, concurrency, extra, name=f"bots-{os.getppid()}-{index}")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - report, then leave the child
            log.exception("solo_worker_failed", index=index)
            code = 1
        finally:
            try:  # `os._exit` runs no atexit hook: the spans still queued, the metrics' last interval
                flush_spans()
                shutdown_metrics()
            finally:
                os._exit(code)
    return pid


def _back_off(seconds: float, stopping: Callable[[], bool]) -> None:
    """Wait `seconds` in short slices, by the monotonic clock. One plain `time.sleep(1.0)`
    here was seen, in a CI run, still asleep 45 s later (py-spy: the supervisor at that line,
    its only thread in `hrtimer_nanosleep`), so no worker was started again; a slice that
    comes back far too late is logged."""
    end = time.monotonic() + seconds
    while not stopping():
        now = time.monotonic()
        if now >= end:
            return
        time.sleep(min(0.05, end - now))
        late = time.monotonic() - now - 0.05
        if late > 1.0:
            log.warning("supervisor_overslept", seconds=round(late, 3))


def supervise_solo(app: BotsApp, count: int, extra: list[str]) -> None:
    """Fork `count` solo Celery workers and keep them running until SIGTERM/SIGINT."""
    stopping = False

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        if not stopping:
            log.info("bots_workers_stopping", signal=signal.Signals(signum).name, sender="signal")
        stopping = True
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)  # Celery's warm shutdown: finish the task at hand
            except ProcessLookupError:
                pass

    children: dict[int, int] = {}  # pid -> index
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for index in range(count):
        children[_fork_solo(app, index, extra)] = index
    log.info("bots_workers_started", pool="solo", processes=count)
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            log.warning("bots_workers_lost", processes=len(children))  # reaped elsewhere: nothing to keep
            break
        except InterruptedError:
            continue
        if pid not in children:
            continue
        index = children.pop(pid)
        if stopping:
            continue
        log.warning("solo_worker_exited", index=index, status=status)
        _back_off(1.0, lambda: stopping)  # a child that cannot start must not spin
        if not stopping:
            children[_fork_solo(app, index, extra)] = index


def main(registry: Registry | None = None, argv: list[str] | None = None) -> None:
    configure("bots-worker")
    configure_metrics("bots-worker")  # each forked worker gets a provider of its own
    with exit_on_bad_setting():  # its workers dial the command service lazily, in a task: stop now
        app = bootstrap(registry=registry)
    plaintext_peers({"FAMIGLIA_COMMAND_ADDR": app.settings.command_addr})
    extra = sys.argv[1:] if argv is None else argv
    processes, pool, concurrency = layout(app.bots)
    if processes > 1:
        supervise_solo(app, processes, extra)
    else:
        _run_celery(app, pool, concurrency, extra)


if __name__ == "__main__":
    main()
