"""A decide task continues the dispatcher's trace, or, after a bot's own move, starts a new one
linked to it (services.bots.entrypoints.celery_app._continued_trace)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from opentelemetry import trace

from famiglia.telemetry import FOLLOWS_KEY
from services.bots.entrypoints.celery_app import TRACE_HEADER, _continued_trace

CARRIED = "0af7651916cd43dd8448eb211c80319c"


@pytest.mark.parametrize("follows", [False, True])
def test_the_task_runs_in_the_carried_trace_unless_it_follows_a_bot(follows: bool) -> None:
    carrier = {"traceparent": f"00-{CARRIED}-b7ad6b7169203331-01", **({FOLLOWS_KEY: "1"} if follows else {})}
    request = SimpleNamespace(**{TRACE_HEADER: carrier})
    with _continued_trace(request, "bots.decide"):
        inside = trace.get_current_span().get_span_context()
    # (with telemetry configured, the new trace has fresh ids: tests/unit/foundation/test_telemetry.py)
    assert (f"{inside.trace_id:032x}" == CARRIED) is not follows
    assert not trace.get_current_span().get_span_context().is_valid
