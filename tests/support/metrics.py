"""Metrics recorded in memory, for tests that check what a service measured."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from famiglia.telemetry.metrics import metrics_to


class Recorded:
    """What an in-memory reader collected: `points(name)` -> [(attributes, value)], a
    counter's or gauge's value, a histogram's (count, sum)."""

    def __init__(self, reader: InMemoryMetricReader) -> None:
        self.reader = reader

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        data = self.reader.get_metrics_data()
        found: list[tuple[dict[str, Any], Any]] = []
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name != name:
                        continue
                    for point in metric.data.data_points:
                        value = (point.count, point.sum) if hasattr(point, "count") else point.value
                        found.append((dict(point.attributes or {}), value))
        return found

    def value(self, name: str, **attributes: Any) -> Any:
        """The one point of `name` with exactly these attributes (None if there is none)."""
        matching = [value for found, value in self.points(name) if found == attributes]
        assert len(matching) <= 1, (name, attributes, matching)
        return matching[0] if matching else None


@contextmanager
def recorded() -> Iterator[Recorded]:
    """Metrics on for the block, into an in-memory reader: build the app inside it."""
    reader = InMemoryMetricReader()
    with metrics_to(MeterProvider(metric_readers=[reader])):
        yield Recorded(reader)
