"""The command service's hot log line writes what structlog's JSON chain writes."""

from __future__ import annotations

import io
import json
import logging
import os
from pathlib import Path

import pytest
import structlog
from opentelemetry.sdk.trace import TracerProvider

from famiglia import telemetry
from famiglia.telemetry import EventLine, server_span
from services.command.app import accepted_line


def _lines(buffer: io.StringIO) -> list[dict]:
    out = []
    for text in buffer.getvalue().splitlines():
        line = json.loads(text)
        assert line.pop("timestamp").endswith("Z")
        out.append(line)
    return out


@pytest.fixture()
def outputs(monkeypatch: pytest.MonkeyPatch):
    """(fast buffer, structlog buffer, structlog logger) with the production JSON chain."""
    fast, slow = io.StringIO(), io.StringIO()
    monkeypatch.setattr(telemetry, "_json_out", structlog.WriteLogger(fast))
    reference = structlog.wrap_logger(
        structlog.WriteLogger(slow),
        processors=[structlog.contextvars.merge_contextvars, telemetry._json_tail],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    return fast, slow, reference


@pytest.mark.parametrize("values", [
    ("m1", 2, "c-1", "play_card", 17, 3),
    ('m"\\\n\u00e9', 0, "\u2603" * 3, "bid", 1, 12),
])
def test_the_accepted_line_is_the_structlog_line(outputs, values) -> None:
    fast, slow, reference = outputs
    with structlog.contextvars.bound_contextvars(service="command", tenant="t1"), server_span("SubmitCommand", provider=TracerProvider()):
        accepted_line(*values)
        reference.info("command_accepted", **dict(zip(accepted_line.keys, values, strict=True)))
    ours, theirs = _lines(fast), _lines(slow)
    assert ours == theirs and len(ours) == 1
    # The same key order, bound context variables aside (structlog takes them in the
    # context's own order, which is not the order they were bound in).
    bound = {"service", "tenant"}
    assert [k for k in ours[0] if k not in bound] == [k for k in theirs[0] if k not in bound]
    assert ours[0]["trace_id"] and ours[0]["tenant"] == "t1" and ours[0]["service"] == "command"


def test_values_json_cannot_hold_as_is_go_through_structlog(outputs, monkeypatch) -> None:
    fast, slow, reference = outputs
    line = EventLine("test", "odd_values", "flag", "nothing", "ratio")
    monkeypatch.setattr(line, "log", reference)
    line(True, None, 0.5)
    assert fast.getvalue() == ""
    assert _lines(slow)[0] == {"flag": True, "nothing": None, "ratio": 0.5, "event": "odd_values", "level": "info"}


def test_without_json_output_the_line_goes_through_structlog(monkeypatch) -> None:
    monkeypatch.setattr(telemetry, "_json_out", None)
    with structlog.testing.capture_logs() as captured:
        accepted_line("m1", 1, "c-1", "pass", 4, 1)
    assert captured == [{"match_id": "m1", "seat": 1, "command_id": "c-1", "kind": "pass", "version": 4,
                         "events": 1, "event": "command_accepted", "log_level": "info"}]


def test_without_a_span_the_line_has_no_trace_ids_like_structlog(outputs) -> None:
    fast, slow, reference = outputs
    values = ("m%s%d", 0, "c-100%", "pass", 99, 1)  # percent signs are values, not formats
    accepted_line(*values)
    reference.info("command_accepted", **dict(zip(accepted_line.keys, values, strict=True)))
    ours, theirs = _lines(fast), _lines(slow)
    assert ours == theirs and "trace_id" not in ours[0] and ours[0]["command_id"] == "c-100%"


def test_a_line_whose_value_types_change_quotes_each_value_by_its_own_type(outputs) -> None:
    """The line remembers where the last line's str values were; a line with other types
    (an int where a str was, or a value JSON cannot hold) is checked again, never quoted
    by the memory of another."""
    fast, slow, reference = outputs
    line = EventLine("test", "typed", "a", "b", "c")
    cases = [("x", 1, "y"), (2, "z", 3), ("x", 1, "y"), ("x", None, "y"), (4, 5, 6), ("q", "r", "s")]
    for values in cases:
        if None not in values:  # that one goes through structlog's own logger, not these buffers
            reference.info("typed", **dict(zip(line.keys, values, strict=True)))
        line(*values)
    ours, theirs = _lines(fast), _lines(slow)
    assert ours == theirs and [(o["a"], o["b"], o["c"]) for o in ours] == [v for v in cases if None not in v]


def test_to_a_file_the_line_is_written_with_the_gil_kept_and_in_order(monkeypatch, tmp_path) -> None:
    """Where logs go to a file (or /dev/null) the line skips Python's file layers (famiglia.heldio)
    and still lands whole, between the lines structlog writes to the same file, in order."""
    from famiglia import heldio

    path = tmp_path / "service.log"
    with open(path, "w") as file:
        writer = structlog.WriteLogger(file)
        fd = heldio.never_waiting_fd(file)
        assert fd is not None
        monkeypatch.setattr(telemetry, "_json_out", writer)
        monkeypatch.setattr(telemetry, "_held", (writer, fd))
        held: list[int] = []
        real = telemetry.write_held
        monkeypatch.setattr(telemetry, "write_held", lambda fd, data: held.append(len(data)) or real(fd, data))
        reference = structlog.wrap_logger(writer, processors=[telemetry._json_tail],
                                          wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
        reference.info("before")
        accepted_line("m1", 2, "c-1", "play_card", 17, 3)
        reference.info("after")
    lines = [json.loads(text) for text in path.read_text().splitlines()]
    assert [line["event"] for line in lines] == ["before", "command_accepted", "after"]
    assert lines[1]["command_id"] == "c-1" and lines[1]["version"] == 17
    assert len(held) == 1


@pytest.fixture()
def held_file(monkeypatch, tmp_path):
    """A log file configured as the JSON output that lines are written to with the GIL kept;
    yields the open file, closed (and so flushed) when the test ends its `with`."""
    path = tmp_path / "service.log"
    with open(path, "w") as file:
        writer = structlog.WriteLogger(file)
        monkeypatch.setattr(telemetry, "_json_out", writer)
        monkeypatch.setattr(telemetry, "_held", (writer, file.fileno()))
        yield file


def test_a_short_held_write_is_finished_by_python(held_file, monkeypatch) -> None:
    with held_file:
        monkeypatch.setattr(telemetry, "write_held", lambda fd, data: os.write(fd, data[:10]))
        accepted_line("m1", 2, "c-1", "play_card", 17, 3)
        monkeypatch.setattr(telemetry, "write_held", lambda fd, data: 0)  # an error: all of it by Python
        accepted_line("m2", 0, "c-2", "pass", 18, 1)
    lines = [json.loads(text) for text in Path(held_file.name).read_text().splitlines()]
    assert [(line["match_id"], line["command_id"]) for line in lines] == [("m1", "c-1"), ("m2", "c-2")]


def test_another_writer_than_the_held_one_is_written_by_python(outputs, monkeypatch, tmp_path) -> None:
    fast, slow, reference = outputs  # a test's StringIO writer replaced the configured one
    with open(tmp_path / "other", "w") as file:
        monkeypatch.setattr(telemetry, "_held", (structlog.WriteLogger(file), file.fileno()))
        accepted_line("m1", 2, "c-1", "play_card", 17, 3)
    assert (tmp_path / "other").read_text() == ""
    assert _lines(fast)[0]["command_id"] == "c-1"


def test_text_left_in_the_files_buffer_is_written_before_a_held_line(held_file) -> None:
    with held_file:
        held_file.write("partial ")  # someone else's unflushed text on the same file
        accepted_line("m1", 2, "c-1", "play_card", 17, 3)
    text = Path(held_file.name).read_text()
    assert text.startswith("partial {") and json.loads(text[len("partial "):])["command_id"] == "c-1"


def test_every_thread_writes_the_service(outputs, monkeypatch) -> None:
    """The service is on every line, not only on the main thread's (a context variable bound
    there is not seen by the gRPC, consumer and dispatcher threads)."""
    import threading

    fast, slow, reference = outputs
    monkeypatch.setattr(telemetry, "_configured", "command")
    values = ("m1", 2, "c-1", "play_card", 17, 3)

    def write() -> None:
        accepted_line(*values)
        reference.info("command_accepted", **dict(zip(accepted_line.keys, values, strict=True)))

    worker = threading.Thread(target=write)
    worker.start()
    worker.join()
    ours, theirs = _lines(fast), _lines(slow)
    assert ours == theirs and ours[0]["service"] == "command"
    assert list(ours[0]) == list(theirs[0])
