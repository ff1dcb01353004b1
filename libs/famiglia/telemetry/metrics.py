"""Metrics for every service: OpenTelemetry instruments that cost nothing when off.

`configure_metrics(service)` once per process, after `configure`. With OTEL_METRICS_EXPORTER
(console, otlp; otlp also when only OTEL_EXPORTER_OTLP_ENDPOINT is set) it sets a meter
provider that exports every `interval_ms`; without one (the default, and the bench) metrics
are off for the life of the process: `meter()` answers None, the services make no
instrument and each recording site is one `is not None` test. Even OpenTelemetry's no-op
instruments cost a call and an attributes dict each, about a microsecond a command.

A process forked after `configure_metrics` (the bots' solo workers, Celery's prefork pool)
gets a provider of its own, named by its own pid (`service.instance.id`): the cumulative
counters of two processes under one identity would overwrite each other in the collector.
The metrics themselves are listed in docs/metrics.md.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import metrics as otel_metrics
from opentelemetry.metrics import Meter, MeterProvider

from . import exporters

_provider: MeterProvider | None = None
"""The provider instruments come from; None: metrics are off."""
_made: tuple[str, int] | None = None
"""(service, export interval) of the provider `configure_metrics` made, for a forked child's."""

rpc: RpcInstruments | None = None
"""The instruments of every served call (`famiglia.grpcutil.server.rpc`), or None when off: the
wrapper reads this one name per call and takes its measured path only when it is set."""


def configure_metrics(service: str, interval_ms: int = 10_000) -> None:
    """Export metrics as OTEL_METRICS_EXPORTER says (a typo stops the service: it meant OTLP);
    without an exporter, or with OTEL_SDK_DISABLED=true, metrics stay off (idempotent)."""
    global _made
    if _made is not None or os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return
    named = exporters("OTEL_METRICS_EXPORTER")
    if not named:
        return
    provider = _exporting_provider(service, named, interval_ms)
    _made = (service, interval_ms)
    otel_metrics.set_meter_provider(provider)  # what libraries (and the projection's lag) meter with
    _use(provider)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_own_provider)


def _exporting_provider(service: str, named: list[str], interval_ms: int) -> MeterProvider:
    from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
    from opentelemetry.sdk.metrics.export import (
        ConsoleMetricExporter,
        MetricExporter,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.resources import Resource

    found: list[MetricExporter] = []
    if "console" in named:
        found.append(ConsoleMetricExporter(out=sys.stderr))
    if "otlp" in named:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        found.append(OTLPMetricExporter())
    name = os.environ.get("OTEL_SERVICE_NAME", "").strip() or f"famiglia-{service}"  # blank: the default
    resource = Resource.create({"service.name": name,
                                "service.instance.id": f"{socket.gethostname()}:{os.getpid()}"})
    readers = [PeriodicExportingMetricReader(e, export_interval_millis=interval_ms) for e in found]
    return SdkMeterProvider(resource=resource, metric_readers=readers)


def _own_provider() -> None:
    """In a forked child: a provider of its own (its pid in `service.instance.id`)."""
    if _made is not None:
        _use(_exporting_provider(_made[0], exporters("OTEL_METRICS_EXPORTER"), _made[1]))


def _use(provider: MeterProvider | None) -> None:
    global _provider, rpc
    _provider = provider
    rpc = None if provider is None else RpcInstruments(provider.get_meter("famiglia.grpc"))


def metrics_on() -> bool:
    """Whether this process records metrics (decided by `configure_metrics`)."""
    return _provider is not None


def meter(name: str) -> Meter | None:
    """The meter of `name`, or None when metrics are off: make no instrument then."""
    return None if _provider is None else _provider.get_meter(name)


@contextmanager
def metrics_to(provider: MeterProvider | None) -> Iterator[None]:
    """Record into `provider` for the block (tests: an SDK provider with an in-memory reader;
    None: metrics off), whatever `configure_metrics` chose."""
    before = _provider
    _use(provider)
    try:
        yield
    finally:
        _use(before)


class RpcInstruments:
    """`famiglia.rpc.calls` {rpc.service, rpc.method, status, code} and `famiglia.rpc.duration`
    (ms) {rpc.service, rpc.method}; each attribute set is made once."""

    __slots__ = ("calls", "duration", "_called", "_timed")

    def __init__(self, meter: Meter) -> None:
        self.calls = meter.create_counter("famiglia.rpc.calls", unit="{call}",
                                          description="calls served, by their status and famiglia code")
        self.duration = meter.create_histogram("famiglia.rpc.duration", unit="ms",
                                               description="time to answer a unary call")
        self._called: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        self._timed: dict[tuple[str, str], dict[str, Any]] = {}

    def called(self, service: str, method: str, status: str, code: str, began: float | None) -> None:
        """One call ended with `status` (a gRPC status name) and `code` ("" when OK); `began`:
        its `time.perf_counter()` at the start, or None for no duration (a stream)."""
        key = (service, method, status, code)
        attributes = self._called.get(key)
        if attributes is None:
            attributes = self._called[key] = {"rpc.service": service, "rpc.method": method,
                                              "status": status, "code": code}
        self.calls.add(1, attributes)
        if began is not None:
            timed = self._timed.get(key[:2])
            if timed is None:
                timed = self._timed[key[:2]] = {"rpc.service": service, "rpc.method": method}
            self.duration.record((time.perf_counter() - began) * 1000.0, timed)
