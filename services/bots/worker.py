"""`python -m services.bots.worker`: a real `celery worker` for bot decisions and clocks.

The pool is prefork with one process per core by default (FAMIGLIA_BOTS_POOL,
FAMIGLIA_BOTS_CONCURRENCY); search policies are CPU-bound, so threads would
share one core under the GIL.
"""

from __future__ import annotations

import os
import socket
import sys

from famiglia.engine.registry import Registry
from famiglia.telemetry import configure

from .bootstrap import bootstrap
from .entrypoints.celery_app import CLOCKS_QUEUE, DECISIONS_QUEUE


def worker_argv(pool: str, concurrency: int, loglevel: str = "INFO") -> list[str]:
    return [
        "worker", "-P", pool, "-c", str(concurrency), "-Q", f"{DECISIONS_QUEUE},{CLOCKS_QUEUE}",
        "-n", f"bots-{os.getpid()}@{socket.gethostname()}", "--loglevel", loglevel,
        "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]


def main(registry: Registry | None = None, argv: list[str] | None = None) -> None:
    configure("bots-worker")
    app = bootstrap(registry=registry)
    celery = app.celery
    extra = sys.argv[1:] if argv is None else argv
    celery.worker_main(worker_argv(app.bots.pool, app.bots.workers, app.settings.log_level.upper()) + extra)


if __name__ == "__main__":
    main()
