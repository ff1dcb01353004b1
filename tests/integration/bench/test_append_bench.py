"""Figure 2 against a real redis-server: each pair's raw XADD waits for its reply as its
append does, so a ratio is the script's cost and not a difference in waiting."""

from __future__ import annotations

import pytest

from famiglia import spinwait
from famiglia.bench.append import bench_append
from famiglia.bench.harness import Report
from famiglia.eventstore import redis_store

pytestmark = pytest.mark.redis


class _AlwaysIdle:
    def poll_now(self, now: float) -> bool:
        return True


def test_each_baseline_waits_for_its_reply_as_its_append_does(redis_url: str, monkeypatch) -> None:
    polls = {"n": 0}
    real = redis_store.recv_polling

    def counted(sock, buffer, budget: float):  # type: ignore[no-untyped-def]
        polls["n"] += 1
        return real(sock, buffer, budget)

    monkeypatch.setattr(redis_store, "recv_polling", counted)
    monkeypatch.setattr(spinwait, "machine", lambda: _AlwaysIdle())
    report = Report()
    bench_append(report, redis_url, quick=True)
    (figure,) = report.figures
    assert figure.ratio is not None and figure.ratio > 0
    # warm-up + 5 rounds of 2,000 calls a side: the noted pair's Lua appends and kept XADDs
    # are all polled for; the figure's pair never is, nor redis-py's own client.xadd
    assert polls["n"] == 2 * 6 * 2000
    assert "both polling for the reply" in figure.notes
