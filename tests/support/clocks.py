"""The command service's own clock past every turn clock: for tests that submit a person's clock
default as the bots' `run_clock` does once the seat's clock ran out, without waiting it out
(the service refuses one before the seat's deadline: `clock_not_run_out`, docs/bots.md "Turn
clocks")."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from services.command.app import CommandApp

RUN_OUT_S = 10 ** 7
"""How far ahead the service's clock runs: past any clock a game allows (a day at most)."""


def run_out(app: CommandApp) -> CommandApp:
    """`app` with its clock past every seat's deadline, from now on."""
    app.wall = lambda: time.time() + RUN_OUT_S
    return app


@contextmanager
def clocks_run_out(app: CommandApp) -> Iterator[CommandApp]:
    """`app` with its clock past every seat's deadline, in the block."""
    wall = app.wall
    run_out(app)
    try:
        yield app
    finally:
        app.wall = wall
