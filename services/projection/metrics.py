"""The projection's OpenTelemetry meter provider, chosen by the standard variables.

OTEL_METRICS_EXPORTER=console|otlp|none (otlp also when OTEL_EXPORTER_OTLP_ENDPOINT
is set); without one, instruments are no-ops and the lag still reaches the logs.
"""

from __future__ import annotations

import os
import sys

from opentelemetry import metrics

from famiglia.telemetry import exporters


def configure_metrics(service: str = "projection", interval_ms: int = 10_000) -> None:
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return
    named = exporters("OTEL_METRICS_EXPORTER")  # a typo stops the service (it meant OTLP)
    if not named:
        return
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        ConsoleMetricExporter,
        MetricExporter,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.resources import Resource

    exporters_: list[MetricExporter] = []
    if "console" in named:
        exporters_.append(ConsoleMetricExporter(out=sys.stderr))
    if "otlp" in named:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        exporters_.append(OTLPMetricExporter())
    service_name = os.environ.get("OTEL_SERVICE_NAME", "").strip() or f"famiglia-{service}"  # blank: the default
    resource = Resource.create({"service.name": service_name})
    readers = [PeriodicExportingMetricReader(exporter, export_interval_millis=interval_ms) for exporter in exporters_]
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))
