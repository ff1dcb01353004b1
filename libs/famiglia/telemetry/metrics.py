"""Metrics for every service: OpenTelemetry instruments that cost nothing when off.

`configure_metrics(service)` once per process, after `configure`. With OTEL_METRICS_EXPORTER
(console, otlp; otlp also when only OTEL_EXPORTER_OTLP_ENDPOINT is set) it sets a meter
provider that exports every `interval_ms`; without one (the default, and the bench) metrics
are off for the life of the process: `meter()` answers None, the services make no
instrument and each recording site is one `is not None` test. Even OpenTelemetry's no-op
instruments cost a call and an attributes dict each, about a microsecond a command.

On, a count goes to a `Tally` (a dict under a lock, ~0.2 µs) that an observable counter reads
at each export, not to the SDK's `Counter.add` (5-6 µs: its attributes cleaned and hashed, a
measurement built and handed through the reader storage). A histogram stays one SDK `record`
a measurement: OpenTelemetry has no asynchronous histogram, and the Python SDK no
`MetricProducer`, to hand it counts bucketed elsewhere (docs/metrics.md, "Cost").

A process forked after `configure_metrics` (the bots' solo workers, Celery's prefork pool)
gets a provider of its own, named by its own pid (`service.instance.id`): the cumulative
counters of two processes under one identity would overwrite each other in the collector.
The metrics themselves are listed in docs/metrics.md.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from opentelemetry import metrics as otel_metrics
from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, Observation

from . import exporters, get_logger

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricExporter

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
    otel_metrics.set_meter_provider(provider)  # what libraries meter with
    _use(provider)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_own_provider)


def _exporting_provider(service: str, named: list[str], interval_ms: int) -> MeterProvider:
    from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
    from opentelemetry.sdk.metrics.export import (
        MetricExporter,
        MetricExportResult,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.resources import Resource

    class ThisProcessOnly(MetricExporter):
        """`exporter`, silent in any process but the one that made it: a forked child inherits
        its parent's provider with the parent's counts, which must not reach the collector a
        second time (the SDK gives that provider a random `service.instance.id` in a child)."""

        def __init__(self, exporter: MetricExporter) -> None:
            super().__init__(preferred_temporality=exporter._preferred_temporality,
                             preferred_aggregation=exporter._preferred_aggregation)
            self._exporter, self._pid = exporter, os.getpid()

        def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> Any:
            if os.getpid() != self._pid:
                return MetricExportResult.SUCCESS
            return self._exporter.export(metrics_data, timeout_millis=timeout_millis, **kwargs)

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return os.getpid() != self._pid or self._exporter.force_flush(timeout_millis=timeout_millis)

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
            if os.getpid() == self._pid:
                self._exporter.shutdown(timeout_millis=timeout_millis, **kwargs)

    class OwnThread(PeriodicExportingMetricReader):
        """The SDK's periodic reader, whose thread is not started again in a forked child (the
        SDK's own fork hook does): the child exports through a provider of its own."""

        def _at_fork_reinit(self) -> None:
            pass

    name = os.environ.get("OTEL_SERVICE_NAME", "").strip() or f"famiglia-{service}"  # blank: the default
    resource = Resource.create({"service.name": name,
                                "service.instance.id": f"{socket.gethostname()}:{os.getpid()}"})
    readers = [OwnThread(ThisProcessOnly(e), export_interval_millis=interval_ms) for e in _exporters(named)]
    return SdkMeterProvider(resource=resource, metric_readers=readers)


def _exporters(named: list[str]) -> list[MetricExporter]:
    """The exporters OTEL_METRICS_EXPORTER names (`exporters`): console, otlp."""
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

    found: list[MetricExporter] = []
    if "console" in named:
        found.append(ConsoleMetricExporter(out=sys.stderr))
    if "otlp" in named:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        found.append(OTLPMetricExporter())
    return found


def _own_provider() -> None:
    """In a forked child: a provider of its own (its pid in `service.instance.id`); the parent's,
    inherited, exports nothing more (`_exporting_provider`)."""
    global _tallies_lock
    _tallies_lock = threading.Lock()  # another thread of the parent may have held it at the fork
    for made in list(_tallies.values()):
        for inherited in made.values():
            inherited._lock = threading.Lock()  # the same: a count of the parent's, mid-`add`
    if _made is not None:
        _use(_exporting_provider(_made[0], exporters("OTEL_METRICS_EXPORTER"), _made[1]))


def shutdown_metrics(timeout_millis: float = 5_000) -> None:
    """Export what was counted since the last export, and stop exporting: for a process that
    leaves by `os._exit` (a forked bots worker, a Celery pool process), where the provider's
    own `atexit` hook never runs. Nothing when metrics are off; once is enough."""
    shutdown = getattr(_provider, "shutdown", None)
    if shutdown is None:
        return
    try:
        shutdown(timeout_millis=timeout_millis)
    except Exception:  # noqa: BLE001 - a collector away must not keep a worker from leaving
        get_logger("famiglia.telemetry").warning("metrics_final_export_failed", exc_info=True)


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


#: Attribute sets a tally keeps apart at most, as the SDK's default cardinality limit: past it,
#: new ones count together under `otel.metric.overflow`, as the SDK's own overflow point.
TALLY_LIMIT = 2000
_OVERFLOW: tuple[Any, ...] = (object(),)  # equal to no tuple of attribute values


class Tally:
    """A monotonic counter counted in plain Python and reported by an observable counter when
    the metrics are read (once an export): `add` is a dict update under a lock, where the SDK's
    `Counter.add` costs 5-6 µs. Counts are kept by the tuple of their attributes' values, in
    `keys`' order; each tuple's attributes dict is made once, at its first export. Made by
    `tally`, so that two users of one meter share one count, as they shared the SDK's counter."""

    __slots__ = ("keys", "_counts", "_lock", "_attributes", "__weakref__")

    def __init__(self, meter: Meter, name: str, keys: tuple[str, ...], *, unit: str, description: str) -> None:
        self.keys = keys
        self._counts: dict[tuple[str, ...], int] = {}
        # `d[k] = d.get(k, 0) + n` is not atomic under the GIL (a thread may be switched in
        # between the read and the write, losing its count); an uncontended lock is ~0.1 µs.
        self._lock = threading.Lock()
        self._attributes: dict[tuple[str, ...], dict[str, Any]] = {}
        meter.create_observable_counter(name, [self._observe], unit=unit, description=description)

    def add(self, values: tuple[str, ...] = (), amount: int = 1) -> None:
        """Count `amount` for the attributes `values` (one per key, in order)."""
        with self._lock:
            counts = self._counts
            found = counts.get(values)
            if found is not None:
                counts[values] = found + amount
            elif len(counts) < TALLY_LIMIT:
                counts[values] = amount
            else:
                counts[_OVERFLOW] = counts.get(_OVERFLOW, 0) + amount

    def counts(self) -> dict[tuple[str, ...], int]:
        """A copy of the counts so far, by attribute values."""
        with self._lock:
            return dict(self._counts)

    def _observe(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(count, self._attributes_of(values)) for values, count in self.counts().items()]

    def _attributes_of(self, values: tuple[str, ...]) -> dict[str, Any]:
        found = self._attributes.get(values)
        if found is None:
            found = self._attributes[values] = ({"otel.metric.overflow": True} if values is _OVERFLOW
                                                else dict(zip(self.keys, values, strict=True)))
        return found


_NO_METHODS: dict[str, dict[str, Any]] = {}

_tallies: weakref.WeakKeyDictionary[Meter, dict[str, Tally]] = weakref.WeakKeyDictionary()
_tallies_lock = threading.Lock()


def tally(meter: Meter, name: str, keys: tuple[str, ...] = (), *, unit: str, description: str) -> Tally:
    """The tally `name` of `meter`, made on first use: the SDK keeps the callbacks of an
    instrument's first registration only, so a second one (two apps of a test, a process's
    second `CommandApp`) counts into the first's."""
    with _tallies_lock:
        made = _tallies.setdefault(meter, {})
        found = made.get(name)
        if found is None:
            found = made[name] = Tally(meter, name, keys, unit=unit, description=description)
        elif found.keys != keys:
            raise ValueError(f"{name} is counted by {found.keys}, not {keys}")
        return found


class RpcInstruments:
    """`famiglia.rpc.calls` {rpc.service, rpc.method, status, code} (a tally),
    `famiglia.rpc.duration` (ms) {rpc.service, rpc.method} (the SDK's histogram, one `record` a
    unary call, its attributes dict made once per method) and `famiglia.rpc.stuck`
    {rpc.service, rpc.method} (a tally, counted by `grpcutil.watchdog`)."""

    __slots__ = ("calls", "duration", "stuck", "_timed")

    def __init__(self, meter: Meter) -> None:
        self.calls = tally(meter, "famiglia.rpc.calls", ("rpc.service", "rpc.method", "status", "code"),
                           unit="{call}", description="calls served, by their status and famiglia code")
        self.duration = meter.create_histogram("famiglia.rpc.duration", unit="ms",
                                               description="time to answer a unary call")
        self.stuck = tally(meter, "famiglia.rpc.stuck", ("rpc.service", "rpc.method"), unit="{call}",
                           description="unary calls still running past the stuck-call bound (the watchdog's)")
        self._timed: dict[str, dict[str, dict[str, Any]]] = {}

    def called(self, service: str, method: str, status: str, code: str, began: float | None) -> None:
        """One call ended with `status` (a gRPC status name) and `code` ("" when OK); `began`:
        its `time.perf_counter()` at the start, or None for no duration (a stream)."""
        self.calls.add((service, method, status, code))
        if began is not None:
            elapsed_ms = (time.perf_counter() - began) * 1000.0
            timed = self._timed.get(service, _NO_METHODS).get(method)
            if timed is None:
                timed = self._timed.setdefault(service, {}).setdefault(
                    method, {"rpc.service": service, "rpc.method": method})
            self.duration.record(elapsed_ms, timed)
