"""The consumer gathers a trickle of events into batches: after a short read it waits out
`gather_ms` before reading again; after a full read (a backlog) it reads again at once."""

from __future__ import annotations

import dataclasses
import threading
import time

from services.projection.app import ProjectionApp

from .support import MatchSpec, write_matches


def test_a_short_read_waits_out_the_gather_window_and_a_full_read_does_not(app: ProjectionApp) -> None:
    runner = app.runner()
    runner.config = dataclasses.replace(runner.config, gather_ms=200, batch=3)
    now = [1000.0]  # a clock that moves only when the test says (a loaded machine can't stretch the window)
    runner.clock = lambda: now[0]
    assert runner.gather_pause() == 0.0  # nothing read yet
    [played] = write_matches(app.store, app.registry, [MatchSpec("g1", ["ann", "bob"], seed=3)])
    assert len(played.envelopes) > runner.config.batch  # one partition: the first read is full
    runner.run_once(block_ms=0)
    assert runner.gather_pause() == 0.0  # a backlog: read on at once
    pauses = []
    while runner.projected < len(played.envelopes):
        runner.run_once(block_ms=0)
        pauses.append(runner.gather_pause())
    assert pauses[-1] == 0.2  # the read that emptied the backlog came back short
    now[0] += 0.15
    assert abs(runner.gather_pause() - 0.05) < 1e-9  # what is left of the window
    now[0] += 0.06
    assert runner.gather_pause() <= 0.0  # the window is over: read now


def test_the_running_consumer_projects_a_trickle_within_the_gather_window(app: ProjectionApp) -> None:
    runner = app.runner()
    runner.config = dataclasses.replace(runner.config, gather_ms=50, block_ms=100)
    stop = threading.Event()
    thread = threading.Thread(target=runner.run, args=(stop,), daemon=True)
    thread.start()
    try:
        played = write_matches(app.store, app.registry, [MatchSpec(f"t{i}", ["ann", "bob"], seed=i)
                                                         for i in range(3)])
        events = sum(len(p.envelopes) for p in played)
        deadline = time.monotonic() + 30
        while runner.projected < events and time.monotonic() < deadline:
            time.sleep(0.02)
        assert runner.projected == events
    finally:
        stop.set()
        thread.join(timeout=5)
