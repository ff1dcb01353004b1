"""A decide task continues the dispatcher's trace, or, after a bot's own move, starts a new one
linked to it (services.bots.entrypoints.celery_app._continued_trace)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import famiglia.telemetry as telemetry
from famiglia.telemetry import FOLLOWS_KEY
from services.bots.entrypoints.celery_app import TRACE_HEADER, _continued_trace

CARRIED = "0af7651916cd43dd8448eb211c80319c"


def _trace_inside(follows: bool) -> str:
    carrier = {"traceparent": f"00-{CARRIED}-b7ad6b7169203331-01", **({FOLLOWS_KEY: "1"} if follows else {})}
    with _continued_trace(SimpleNamespace(**{TRACE_HEADER: carrier}), "bots.decide"):
        inside = trace.get_current_span().get_span_context()
    assert inside.is_valid
    assert not trace.get_current_span().get_span_context().is_valid  # nothing left current
    return f"{inside.trace_id:032x}"


@pytest.mark.parametrize("follows", [False, True])
def test_with_the_sdk_a_task_after_a_bots_move_runs_in_a_new_trace(follows: bool,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(telemetry, "_provider", TracerProvider)  # the production default: SDK, no exporter
    assert (_trace_inside(follows) == CARRIED) is not follows


def test_without_the_sdk_the_task_keeps_the_carried_trace_rather_than_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tracing off (no SDK): there are no ids to make, so the logs keep the match's trace."""
    monkeypatch.setattr(telemetry, "_provider", trace.NoOpTracerProvider)  # OTEL_SDK_DISABLED's provider
    assert _trace_inside(True) == CARRIED
