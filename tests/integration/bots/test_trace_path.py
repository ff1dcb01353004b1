"""One trace across the whole path (README, "Logs and traces"; docs/bots.md): a person's
SubmitCommand, its events in Redis, the projection, the dispatcher, the Celery task (a real
worker process) and the bot's own SubmitCommands; a refusal, a turn clock and a match made by
matchmaking too. Spans of this process go to an in-memory exporter, the worker's to its log
(`console`); log lines are checked for the match, seat, command and trace they are about."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
import redis
import structlog
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from structlog.testing import LogCapture

from famiglia import telemetry
from famiglia.config import Settings
from famiglia.v1 import envelope_pb2
from tests.e2e.conftest import wait_until
from tests.support.tracing import export_spans_to

from .conftest import SECRET, BotsStack

pytestmark = [pytest.mark.redis, pytest.mark.xdist_group("bots")]
EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def tracing() -> None:
    export_spans_to(EXPORTER)


@contextmanager
def captured_lines() -> Iterator[list[dict[str, Any]]]:
    """structlog's lines of this process with the trace ids the JSON chain adds."""
    capture = LogCapture()
    old = structlog.get_config()["processors"]
    structlog.configure(processors=[structlog.contextvars.merge_contextvars, telemetry._add_trace_ids, capture])
    try:
        yield capture.entries
    finally:
        structlog.configure(processors=old)


def worker_output(stack: BotsStack) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The worker's (JSON log lines, console-exported spans), once it has stopped."""
    text = (stack.tmp / "worker.log").read_text()
    lines = [json.loads(t) for t in text.splitlines() if t.startswith('{"')]
    spans, decoder, at = [], json.JSONDecoder(), 0
    while (at := text.find('{\n    "name"', at)) >= 0:
        span, at = decoder.raw_decode(text, at)
        spans.append(span)
    return lines, spans


def trace_of(parent: str) -> str:
    return parent.split("-")[1]


def spans(name: str, match_id: str) -> list[ReadableSpan]:
    return [s for s in EXPORTER.get_finished_spans() if s.name == name and match_id in (
        (s.attributes or {}).get("famiglia.match_id"), (s.attributes or {}).get("match_id"))]


@pytest.fixture()
def stack(redis_url: str, tmp_path: Path) -> Iterator[BotsStack]:
    stack = BotsStack(redis_url, tmp_path, worker_env={
        "OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "console", "FAMIGLIA_LOG_LEVEL": "debug"})
    from services.projection.bootstrap import bootstrap as projection_bootstrap

    projection = projection_bootstrap(store=stack.command.store, registry=stack.registry, settings=Settings(
        redis_url=redis_url, secret=SECRET, database_url=f"sqlite:///{tmp_path / 'read.db'}"))
    projection.migrate()
    stop = threading.Event()
    projecting = threading.Thread(target=projection.runner("trace-path").run, args=(stop,), daemon=True)
    projecting.start()
    try:
        yield stack
    finally:
        stop.set()
        projecting.join(10)
        if stack.worker is not None:
            stack.close()


def test_a_persons_move_the_bots_answer_a_refusal_and_a_clock_are_one_connected_path(stack: BotsStack) -> None:
    bot = envelope_pb2.SeatInfo(seat=1, bot=True, policy="random", player_id="random")
    with captured_lines() as lines:
        handle = stack.create_match("highcard", 2, seed=9, options={"hand": "2", "clock_s": "1"}, seat_info=[bot])
        match_id = handle.match_id
        me = stack.client.seat(match_id, handle.seat_tokens[0])
        assert wait_until(lambda: bool(me.legal_commands().commands))
        command = me.legal_commands().commands[0]
        with trace.get_tracer("test").start_as_current_span("player-taps-a-card") as tap:
            tapped = f"{tap.get_span_context().trace_id:032x}"
            me.submit(command, command_id="tap-1")
            with pytest.raises(grpc.RpcError):  # the bot's turn now: a rule refuses it
                me.submit(command, command_id="tap-2")
        # the bot answers (two moves of a lease), then seat 0's clock plays its last card
        assert wait_until(lambda: stack.client.spectator(match_id).view().finished, timeout=30)
        assert wait_until(lambda: len(spans("projection.apply", match_id)) >= 4)
        stack.close()  # the worker's spans are written out as it stops
    stored = {e.command_id: e for e in stack.command.store.read(match_id) if e.command_id}
    bots = [c for c in stored if c.startswith("bot:")]
    (clocked,) = [c for c in stored if c.startswith("clock:")]
    assert bots and all(stored[c].seat == 1 for c in bots)

    # SubmitCommand -> eventstore.append -> the stored event: one trace, the client's
    (served,) = [s for s in spans("SubmitCommand", match_id) if s.attributes["famiglia.command_id"] == "tap-1"]
    assert f"{served.context.trace_id:032x}" == tapped
    assert len([s for s in spans("eventstore.append", match_id) if s.parent.span_id == served.context.span_id]) == 1
    assert trace_of(stored["tap-1"].trace["traceparent"]) == tapped
    # the refusal is traced too, with its code
    (refused,) = [s for s in spans("SubmitCommand", match_id) if s.attributes["famiglia.command_id"] == "tap-2"]
    assert f"{refused.context.trace_id:032x}" == tapped and refused.attributes["famiglia.code"]
    # the projection continues the command's trace, or, when its events were projected in one
    # run after an earlier command's (the match's creation, on a busy machine), links to it from
    # the span that continues that one (`_other_commands`); its batch links back to it either way
    applied = [s for s in spans("projection.apply", match_id)
               if s.parent is not None and s.parent.span_id == served.context.span_id]
    if applied:
        assert f"{applied[0].context.trace_id:032x}" == tapped
    else:
        assert [s for s in spans("projection.apply", match_id)
                if any(link.context.span_id == served.context.span_id for link in s.links)]
    batches = [s for s in EXPORTER.get_finished_spans() if s.name == "projection.batch"
               and any(link.context.span_id == served.context.span_id for link in s.links)]
    assert batches

    # dispatcher -> Celery task -> the bot's SubmitCommands: still the person's trace
    worker_lines, worker_spans = worker_output(stack)
    decided = [s for s in worker_spans if s["name"] == "bots.decide" and s["attributes"]["match_id"] == match_id]
    assert decided and decided[0]["context"]["trace_id"] == f"0x{tapped}"
    assert decided[0]["parent_id"] == f"0x{served.context.span_id:016x}"
    for command_id in bots:
        assert trace_of(stored[command_id].trace["traceparent"]) == tapped
    assert any(f"{s.context.trace_id:032x}" == tapped for s in spans("SubmitCommands", match_id))

    # after the bot's own move the clock's task starts a trace linked to that move
    (clock_span,) = [s for s in worker_spans if s["name"] == "bots.clock" and s["attributes"]["version"]
                     == stored[clocked].seq - 1]
    clock_trace = trace_of(stored[clocked].trace["traceparent"])
    assert clock_span["context"]["trace_id"] == f"0x{clock_trace}" != f"0x{tapped}"
    assert [link["context"]["trace_id"] for link in clock_span["links"]] == [f"0x{tapped}"]

    # every line about a command names its match, seat, command id and trace, in each process
    def about(entries: list[dict[str, Any]], event: str) -> list[tuple[Any, ...]]:
        return [(e["match_id"], e["seat"], e.get("command_id"), e.get("trace_id")) for e in entries
                if e["event"] == event and e.get("match_id") == match_id]

    assert (match_id, 0, "tap-1", tapped) in about(lines, "command_accepted")
    assert (match_id, 0, "tap-2", tapped) in about(lines, "command_refused")
    assert {(match_id, 1, c, tapped) for c in bots} <= set(about(lines, "command_accepted"))
    assert (match_id, 0, clocked, clock_trace) in about(lines, "command_accepted")
    assert (match_id, 1, bots[0], tapped) in about(worker_lines, "bot_decision")
    assert (match_id, 0, clocked, clock_trace) in about(worker_lines, "clock_expired")
    assert (match_id, 0, clocked, clock_trace) in about(worker_lines, "turn_clock")


def test_a_match_matchmaking_made_is_in_the_trace_of_its_making(stack: BotsStack, redis_url: str) -> None:
    from famiglia.matchmaking import MatchPolicy
    from famiglia.matchmaking.model import GameShape
    from services.matchmaking.bootstrap import bootstrap as matchmaking_bootstrap
    from services.matchmaking.matcher import MatcherTuning
    from services.matchmaking.settings import MatchmakingSettings

    mm = matchmaking_bootstrap(
        settings=Settings(redis_url=redis_url, secret=SECRET, command_addr=stack.command_addr),
        mm=MatchmakingSettings(policy=MatchPolicy(backfill_after=0, bot_policy="random"),
                               tuning=MatcherTuning(interval_s=0.02)),
        client=redis.Redis.from_url(redis_url, decode_responses=True), games={"highcard": GameShape("highcard", 2, 2)})
    try:
        with captured_lines() as lines:
            player, _ = mm.app.register_guest("P0")
            ticket = mm.app.create_ticket(player.player_id, "highcard", [2], {})
            assert wait_until(lambda: mm.matcher.run_once() >= 0 and bool(
                mm.app.ticket(player.player_id, ticket.ticket_id).match_id))
    finally:
        mm.close()
    (formed,) = [e for e in lines if e["event"] == "match_formed"]
    match_id = formed["match_id"]
    (making,) = [s for s in EXPORTER.get_finished_spans() if s.name == "matchmaking.create_match"
                 and f"{s.context.trace_id:032x}" == formed["trace_id"]]
    created = [s for s in EXPORTER.get_finished_spans() if s.name == "CreateMatch"
               and s.parent is not None and s.parent.span_id == making.context.span_id]
    assert created
    first = stack.command.store.read(match_id)[0]
    assert trace_of(first.trace["traceparent"]) == formed["trace_id"]
    (line,) = [e for e in lines if e["event"] == "match_created" and e["match_id"] == match_id]
    assert line["trace_id"] == formed["trace_id"]


def test_each_match_a_tournament_starts_is_a_trace_linked_to_the_tournaments_creation(redis_url: str) -> None:
    """A tournament's matches are found from its creation: each is a trace of its own (the
    runner's `tournament.start_match`, CreateMatch under it, the match's events keeping it),
    its root linked to the CreateTournament's span."""
    from famiglia.bots.tournament import GamePlan, TournamentSpec
    from famiglia.bots.toy import toy_registry
    from famiglia.client import GameClient
    from famiglia.eventstore.redis_store import RedisEventStore
    from services.bots import tournaments
    from services.command.bootstrap import bootstrap as command_bootstrap
    from services.command.entrypoints.grpc_server import serve

    store = RedisEventStore.connect(redis_url)
    command = command_bootstrap(store=store, registry=toy_registry(), settings=Settings(redis_url=redis_url,
                                                                                      secret=SECRET))
    server, port = serve(command, "127.0.0.1:0", workers=4)
    server.start()
    game = GameClient(f"127.0.0.1:{port}")
    try:
        repo = tournaments.TournamentRepo(redis.Redis.from_url(redis_url))
        spec = TournamentSpec(name="traced", games=(GamePlan("highcard", (2,)),), entrants=("random",),
                              matches_per_game=2)
        with trace.get_tracer("tests").start_as_current_span("CreateTournament") as creating:
            tid = repo.create(spec, trace=telemetry.stored_context())
        runner = tournaments.TournamentRunner(repo, game, store, secret=SECRET)
        runner.step()
        record = repo.get(tid)
        assert record is not None and len(record.started) == 2, record
        for index, match_id in record.started.items():
            (start,) = [s for s in EXPORTER.get_finished_spans() if s.name == "tournament.start_match"
                        and (s.attributes or {}).get("tournament_id") == tid
                        and (s.attributes or {}).get("match_index") == index]
            assert [link.context.span_id for link in start.links] == [creating.get_span_context().span_id]
            assert start.context.trace_id != creating.get_span_context().trace_id  # a trace of its own
            assert [s for s in EXPORTER.get_finished_spans() if s.name == "CreateMatch"
                    and s.parent is not None and s.parent.span_id == start.context.span_id]
            first = store.read(match_id)[0]
            assert trace_of(first.trace["traceparent"]) == f"{start.context.trace_id:032x}"
    finally:
        game.close()
        server.stop(0)
