"""The stuck-call watchdog (famiglia.grpcutil.watchdog), on slots a test writes and reads by an
explicit clock: a unary call past its bound is told once (`call_stuck`), health is told it is
stuck, and told again once every stuck call has ended (`stuck_call_ended`).

Before it, an engine whose `decide` never returned held a call thread and its match's lock for
the life of the process without a word, and health kept answering SERVING."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import structlog

from famiglia.grpcutil.watchdog import Watchdog, where
from famiglia.v1 import game_service_pb2 as pb


class _Servicer:
    pass


def _logged(event: str, captured: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in captured if line["event"] == event]


def _call(began: float, servicer: object, rpc: str = "SubmitCommand") -> tuple[Any, ...]:
    return (began, servicer, rpc, pb.SubmitCommandRequest(match_id="m1", command_id="c1"), None)


def test_a_call_past_its_bound_is_told_once_and_health_comes_back_when_it_ends() -> None:
    ours = _Servicer()
    running: dict[int, tuple[Any, ...] | None] = {}
    told: list[bool] = []
    counted: list[str] = []
    watchdog = Watchdog(30.0, told.append, servicers=[ours], running=running,
                        describe=lambda call: {"match_id": call.request.match_id, "seat": 1},
                        count=lambda call: counted.append(call.rpc))
    stuck = _call(100.0, ours)
    running[1], running[2] = stuck, None
    with structlog.testing.capture_logs() as captured:
        assert watchdog.check(now=129.9) == 0  # under the bound: nothing yet
        assert watchdog.check(now=130.0) == 1
        assert watchdog.check(now=200.0) == 1  # still stuck: not told again
        running[2] = _call(150.0, ours, "GetView")  # a second one
        assert watchdog.check(now=181.0) == 2
        running[1] = None  # the first ends after all (slow, not endless)
        assert watchdog.check(now=182.0) == 1
        running[2] = _call(182.0, ours)  # the second ends, and its thread takes a new call
        assert watchdog.check(now=183.0) == 0
    assert told == [True, False]
    assert counted == ["SubmitCommand", "GetView"]
    lines = _logged("call_stuck", captured)
    assert [(line["rpc"], line["seconds"], line["log_level"]) for line in lines] == \
        [("SubmitCommand", 30.0, "error"), ("GetView", 31.0, "error")], captured
    assert lines[0]["match_id"] == "m1" and lines[0]["seat"] == 1 and lines[0]["bound_s"] == 30.0
    assert [line["rpc"] for line in _logged("stuck_call_ended", captured)] == ["SubmitCommand", "GetView"]


def test_another_servers_calls_are_not_its_to_tell() -> None:
    """Several servers in one process (the tests' stack) share the slots: each watches its own."""
    running: dict[int, tuple[Any, ...] | None] = {1: _call(0.0, _Servicer())}
    told: list[bool] = []
    assert Watchdog(1.0, told.append, servicers=[_Servicer()], running=running).check(now=100.0) == 0
    assert told == []


def test_a_describe_that_fails_still_leaves_the_line() -> None:
    running: dict[int, tuple[Any, ...] | None] = {1: _call(0.0, None)}

    def broken(call: Any) -> dict[str, Any]:
        raise RuntimeError("no")

    with structlog.testing.capture_logs() as captured:
        assert Watchdog(1.0, lambda stuck: None, running=running, describe=broken).check(now=5.0) == 1
    (line,) = _logged("call_stuck", captured)
    assert line["describe_failed"] == "RuntimeError: no"


def test_where_names_what_the_stuck_thread_runs() -> None:
    entered, release = threading.Event(), threading.Event()

    def decide_for_ever() -> None:
        entered.set()
        release.wait(60)

    thread = threading.Thread(target=decide_for_ever)
    thread.start()
    try:
        assert entered.wait(30)
        assert thread.ident is not None
        frames = where(thread.ident)
        assert any("decide_for_ever" in f and "tests/unit/foundation/test_stuck_calls.py" in f for f in frames), frames
        assert "wait" in frames[-1], frames  # innermost last
    finally:
        release.set()
        thread.join()
    assert where(thread.ident) == []


@pytest.mark.parametrize("bound", [0.0, -1.0])
def test_a_bound_of_nothing_is_refused(bound: float) -> None:
    with pytest.raises(ValueError, match="more than 0"):
        Watchdog(bound, lambda stuck: None)


def test_a_call_stuck_while_redis_is_away_restarts_nothing() -> None:
    """A Redis that stops answering (paused, a failover, a network that drops packets) holds
    every call that reads it, past the bound too: those calls are stuck on Redis, not on an
    engine, and a restart would not bring it back (an outage of Redis restarts nothing). So
    liveness turns NOT_SERVING for a stuck call only while the dependencies answer."""
    from grpc_health.v1 import health, health_pb2

    from famiglia.grpcutil.readiness import LIVENESS
    from famiglia.grpcutil.server import _Health

    servicer = health.HealthServicer()
    names = ("", "famiglia.v1.GameService")
    serving, not_serving = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING

    def status() -> dict[str, int]:
        return {name: servicer.Check(health_pb2.HealthCheckRequest(service=name), None).status
                for name in (*names, LIVENESS)}

    told = _Health(servicer, names, ready=True)
    told.ready(False)  # Redis stops answering: out of the Services
    told.stuck(True)  # and a call waiting on it passes the bound
    assert status() == {"": not_serving, "famiglia.v1.GameService": not_serving, LIVENESS: serving}
    told.ready(True)  # Redis answers again and the call still runs: an engine that never returns
    assert status() == {"": not_serving, "famiglia.v1.GameService": not_serving, LIVENESS: not_serving}
    told.ready(False)  # the restart waits for Redis: it would come back to the same outage
    assert status()[LIVENESS] == serving
    told.ready(True)
    told.stuck(False)  # it ended after all
    assert status() == {"": serving, "famiglia.v1.GameService": serving, LIVENESS: serving}


def test_a_stuck_call_is_handed_to_its_service_once_and_again_when_it_ends() -> None:
    """The command service sets the stuck call's command aside (`on_stuck`) as health is told,
    and lifts it if the call ends after all (`on_ended`); a hook that fails is logged and
    the watch, and health, go on (and it is asked again next round: below)."""
    running: dict[int, tuple[Any, ...] | None] = {7: _call(0.0, None), 8: _call(0.0, None, "GetView")}
    order: list[Any] = []

    def on_stuck(ident: int, call: Any) -> None:
        order.append(("stuck", ident, call.rpc))
        if call.rpc == "GetView":
            raise RuntimeError("no")

    watchdog = Watchdog(1.0, lambda stuck: order.append(("health", stuck)), running=running, on_stuck=on_stuck,
                        on_ended=lambda ident, call: order.append(("ended", ident, call.rpc)))
    with structlog.testing.capture_logs() as captured:
        assert watchdog.check(now=5.0) == 2
        assert watchdog.check(now=6.0) == 2  # told once; the failed hook asked again
        running[7] = running[8] = None
        assert watchdog.check(now=7.0) == 0
    # Health first: the hooks may wait on Redis, the verdicts must not (below).
    assert order == [("health", True), ("stuck", 7, "SubmitCommand"), ("stuck", 8, "GetView"),
                     ("stuck", 8, "GetView"),
                     ("health", False), ("ended", 7, "SubmitCommand"), ("ended", 8, "GetView")]
    failed = _logged("stuck_call_hook_failed", captured)
    assert [(line["rpc"], line["hook"]) for line in failed] == [("GetView", "on_stuck")]  # once a minute at most


def test_overdue_counts_the_calls_past_the_bound_whether_told_or_not() -> None:
    ours = _Servicer()
    running: dict[int, tuple[Any, ...] | None] = {1: _call(0.0, ours), 2: _call(9.5, ours), 3: None,
                                                  4: _call(0.0, _Servicer())}
    watchdog = Watchdog(1.0, lambda stuck: None, servicers=[ours], running=running)
    assert watchdog.under_way() == 2
    assert watchdog.overdue(now=10.0) == 1  # no round of `check` has run


def test_only_a_server_that_runs_a_watchdog_has_its_calls_write_their_slots() -> None:
    """Every `@rpc` unary call of every service wrote its thread's slot (a clock read, a tuple,
    a dict store, twice), though only servers with a watchdog read them (matchmaking,
    projection and the bots' servers run none)."""
    import grpc

    from famiglia.grpcutil.server import build_server, rpc
    from famiglia.grpcutil.watchdog import RUNNING
    from famiglia.v1 import game_service_pb2_grpc as pb_grpc

    seen: list[object] = []

    class Games(pb_grpc.GameServiceServicer):
        @rpc
        def ListGames(self, request: Any, context: Any) -> Any:
            seen.append(RUNNING.get(threading.get_ident()))
            return pb.ListGamesResponse()

    for bound in (60.0, None):
        server, port = build_server("127.0.0.1:0", [(pb_grpc.add_GameServiceServicer_to_server, Games(),
                                                     "famiglia.v1.GameService")], workers=4, stuck_call_s=bound)
        server.start()
        try:
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                pb_grpc.GameServiceStub(channel).ListGames(pb.ListGamesRequest(), timeout=30)
        finally:
            server.stop(grace=None)
    watched, unwatched = seen
    assert watched is not None and watched[2] == "ListGames"
    assert unwatched is None


def test_a_stuck_call_its_hook_could_not_hand_on_is_asked_about_again_each_round() -> None:
    """`on_stuck` was asked once per stuck call: a set-aside Redis refused just then (a failover),
    or a call found waiting for its match's lock that then looped in `decide`, was never set
    aside, and the client's retry stalled the next replica. A hook that raises or returns False
    is asked again each round while its call runs; one that returns True or None, never."""
    running: dict[int, tuple[Any, ...] | None] = {7: _call(0.0, None), 8: _call(0.0, None, "GetView"),
                                                  9: _call(0.0, None, "ListGames")}
    answers: dict[int, list[Any]] = {7: [RuntimeError("redis away"), True], 8: [False, False, None], 9: [None]}
    asked: list[int] = []

    def on_stuck(ident: int, call: Any) -> bool | None:
        asked.append(ident)
        answer = answers[ident].pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    ended: list[int] = []
    watchdog = Watchdog(1.0, lambda stuck: None, running=running, on_stuck=on_stuck,
                        on_ended=lambda ident, call: ended.append(ident))
    with structlog.testing.capture_logs():
        watchdog.check(now=5.0)
        assert asked == [7, 8, 9]
        watchdog.check(now=6.0)
        assert asked == [7, 8, 9, 7, 8]  # 7's write made now; 8 still finds nothing to hand on
        running[8] = None  # 8 ends before its hook had anything: never asked again
        watchdog.check(now=7.0)
        watchdog.check(now=8.0)
    assert asked == [7, 8, 9, 7, 8]
    assert ended == [8]


def test_a_stuck_call_that_ends_in_the_stops_drain_is_handed_on_as_ended() -> None:
    """The server's stop stopped its watchdog at once, before the drain: a stuck call (slow,
    not endless) that ended in the grace was never told ended, and the command service's
    quarantine kept what it had set aside for its 6 hours (docs/operations.md, "A stuck call").
    The watchdog takes one last look once the drain is over, before the stop's event is set."""
    from famiglia.grpcutil.server import _Stopping, _StreamGate

    class _Drained:
        def __init__(self) -> None:
            self.drained = threading.Event()

        def stop(self, grace: float | None) -> threading.Event:
            return self.drained

    class _Health:
        def enter_graceful_shutdown(self) -> None:
            pass

    ours = _Servicer()
    running: dict[int, tuple[Any, ...] | None] = {1: _call(0.0, ours)}
    ended: list[int] = []
    watchdog = Watchdog(1.0, lambda stuck: None, servicers=[ours], running=running,
                        on_ended=lambda ident, call: ended.append(ident), every=3600.0)
    assert watchdog.check(now=5.0) == 1
    inner = _Drained()
    stopping = _Stopping(inner, _StreamGate(1), _Health(), watchdog=watchdog)  # type: ignore[arg-type]
    stopped = stopping.stop(grace=5)
    running[1] = None  # the stuck call ends in the grace
    inner.drained.set()  # the drain is over
    assert stopped.wait(30)
    assert ended == [1]


def test_a_hook_that_keeps_failing_is_one_line_a_minute_not_a_traceback_a_round() -> None:
    """With Redis away, `stuck_call_hook_failed` logged a whole traceback every round (about once
    a second) for each stuck call. The first failure has its traceback; then one line a minute at
    most with the failures meanwhile (at once for another kind of error); once the hook answers,
    one `stuck_call_hook_recovered` line."""
    from famiglia.grpcutil.watchdog import HOOK_FAILED_EVERY_S

    running: dict[int, tuple[Any, ...] | None] = {7: _call(0.0, None)}
    errors: list[Exception | None] = [ConnectionError("Redis away")] * 90 + [TimeoutError("slow")] + [None]

    def on_stuck(ident: int, call: Any) -> bool:
        error = errors.pop(0) if errors else None
        if error is not None:
            raise error
        return False

    watchdog = Watchdog(1.0, lambda stuck: None, running=running, on_stuck=on_stuck)
    with structlog.testing.capture_logs() as captured:
        for second in range(92):  # a round a second: 90 refusals, a timeout, then Redis answers
            watchdog.check(now=5.0 + second)
        watchdog.check(now=200.0)  # answered: no line more
    failed = _logged("stuck_call_hook_failed", captured)
    assert [(line.get("exc_info", False), line["failures"]) for line in failed] == \
        [(True, 1), (False, int(HOOK_FAILED_EVERY_S)), (True, 30)], failed
    assert failed[1]["error"] == "ConnectionError: Redis away"
    recovered = _logged("stuck_call_hook_recovered", captured)
    assert [(line["hook"], line["failures"]) for line in recovered] == [("on_stuck", 91)]


def test_a_hook_waiting_on_redis_holds_no_verdict_of_the_watch() -> None:
    """A set-aside or a lift waits up to seconds on a Redis that hangs, and ran on the watchdog's
    thread between its verdicts: with a few such calls, health (NOT_SERVING) and the next stuck
    call's `call_stuck` waited for them all. The hooks run on a thread of their own now: a hook
    that does not return holds no verdict, and a stop's last look still tells what ended."""
    import time

    ours = _Servicer()
    began = time.monotonic() - 100.0
    running: dict[int, tuple[Any, ...] | None] = {7: _call(began, ours)}
    entered, redis_back, told = threading.Event(), threading.Event(), threading.Event()
    stuck_told: list[bool] = []

    def on_stuck(ident: int, call: Any) -> bool:
        entered.set()
        redis_back.wait(60)  # a Redis that does not answer
        return True

    def on_change(stuck: bool) -> None:
        stuck_told.append(stuck)
        told.set()

    watchdog = Watchdog(1.0, on_change, servicers=[ours], running=running, on_stuck=on_stuck, every=0.01)
    watchdog.start()
    try:
        assert entered.wait(30)
        assert told.wait(10)  # health told while the hook waits
        running[8] = _call(began, ours, "GetView")  # another call stuck meanwhile
        deadline = time.monotonic() + 10
        while watchdog.stuck < 2:
            assert time.monotonic() < deadline, "the second stuck call waited for the first's hook"
            time.sleep(0.01)
        running[7] = running[8] = None
        watchdog.finish()  # the hook still waits: the last look's verdicts are told, its hooks skipped
        assert watchdog.stuck == 0 and stuck_told == [True, False]
    finally:
        redis_back.set()
        watchdog.stop()


def test_a_stops_last_look_begins_no_hook_past_its_time() -> None:
    """A stop's last look lifted what each stuck call that ended had set aside, one after the
    other: with Redis hanging, each lift waited seconds, and the exit (`stopped_stuck` too) for
    them all. It begins none past `LAST_LOOK_S`, and says which it left."""
    from famiglia.grpcutil.watchdog import LAST_LOOK_S

    ours = _Servicer()
    clock = [5.0]
    running: dict[int, tuple[Any, ...] | None] = {i: _call(0.0, ours) for i in (1, 2, 3)}
    ended: list[int] = []

    def lift_waiting_on_redis(ident: int, call: Any) -> None:
        ended.append(ident)
        clock[0] += LAST_LOOK_S * 0.75  # a ZREM that waits for its timeout

    watchdog = Watchdog(1.0, lambda stuck: None, servicers=[ours], running=running, every=3600.0,
                        on_ended=lift_waiting_on_redis, clock=lambda: clock[0],
                        describe=lambda call: {"match_id": call.request.match_id})
    assert watchdog.check() == 3
    running.update({1: None, 2: None, 3: None})
    with structlog.testing.capture_logs() as captured:
        watchdog.finish()
    assert watchdog.stuck == 0
    assert ended == [1, 2]  # the third begun past its time: left
    (cut,) = _logged("stuck_call_last_look_cut", captured)
    assert cut["left"] == 1
    # What to lift by hand: the line named only the rpc ("SubmitCommand"), not which match.
    assert cut["calls"] == [{"rpc": "SubmitCommand", "ended": True, "match_id": "m1"}]


class _EndsInTheDrain(dict):  # type: ignore[type-arg]
    """Slots whose call `ident` runs for the watch's own thread, and has ended for any other
    look (a stop's last look): a call that ends in the drain, after the watch has stopped."""

    def __init__(self, ident: int, call: tuple[Any, ...]) -> None:
        super().__init__({ident: call})
        self.ident = ident

    def items(self):  # type: ignore[override]
        if threading.current_thread().name == "stuck-calls":
            return super().items()
        return {**self, self.ident: None}.items()


def test_a_stops_last_look_lifts_what_ended_once_a_set_aside_under_way_is_made() -> None:
    """The hooks' thread stops handing on once stopped, and the last look skipped its hooks
    whenever a set-aside was still waiting on Redis (a second and more): a stuck call that ended
    in the drain was never lifted, and its command stayed refused on every replica for 6 hours.
    The last look waits for the hook under way (within `LAST_LOOK_S`), then hands on the rest."""
    import time

    ours = _Servicer()
    running = _EndsInTheDrain(7, _call(time.monotonic() - 100.0, ours))
    entered, looked = threading.Event(), threading.Event()
    handed: list[tuple[str, int]] = []

    def on_stuck(ident: int, call: Any) -> bool:
        entered.set()
        looked.wait(60)  # a set-aside waiting on Redis until the last look has told its verdicts
        handed.append(("set aside", ident))
        return True

    def on_change(stuck: bool) -> None:
        if not stuck:
            looked.set()

    watchdog = Watchdog(1.0, on_change, servicers=[ours], running=running, on_stuck=on_stuck,  # type: ignore[arg-type]
                        on_ended=lambda ident, call: handed.append(("lifted", ident)), every=0.01)
    watchdog.start()
    try:
        assert entered.wait(30)
        with structlog.testing.capture_logs() as captured:
            watchdog.finish()
        assert handed == [("set aside", 7), ("lifted", 7)], captured
        assert not _logged("stuck_call_last_look_skipped", captured)
    finally:
        looked.set()
        watchdog.stop()


def test_a_failing_hooks_lines_name_the_call_they_are_about() -> None:
    """`stuck_call_hook_failed` and `_recovered` said only the rpc and the hook: with two calls
    stuck (SubmitCommand both), which match's set-aside Redis had not made, nor which one
    was made at last, could not be told. They carry the call's fields, as `call_stuck` does."""
    ours = _Servicer()
    running: dict[int, tuple[Any, ...] | None] = {7: _call(0.0, ours)}
    failing = [True]

    def on_stuck(ident: int, call: Any) -> bool:
        if failing[0]:
            raise ConnectionError("Redis away")
        return True

    watchdog = Watchdog(1.0, lambda stuck: None, servicers=[ours], running=running, on_stuck=on_stuck,
                        describe=lambda call: {"match_id": call.request.match_id})
    with structlog.testing.capture_logs() as captured:
        watchdog.check(now=5.0)
        failing[0] = False
        watchdog.check(now=6.0)
    (failed,) = _logged("stuck_call_hook_failed", captured)
    (recovered,) = _logged("stuck_call_hook_recovered", captured)
    assert failed["match_id"] == "m1" and recovered["match_id"] == "m1"
