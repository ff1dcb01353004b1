"""Commands set aside after their engine did not return (services.command.quarantine): refused
at once, `FAILED_PRECONDITION command_quarantined`, under the same id or the same input; another
command, the same one once the match moved on, and a retry of a command that was taken after all
go on as ever (in-memory store, real bootstrap, High Card).

Before the quarantine, a stuck command retried on the next replica was decided there again, and
its engine looped there too: one command restarted the replicas one after another."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import contextmanager

import pytest
import structlog

from famiglia.bots.toy import ENGINE as HIGHCARD
from famiglia.bots.toy import toy_registry
from famiglia.config import Settings
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.grpcutil.errors import FailedPrecondition
from services.command.app import CommandApp, Viewer
from services.command.bootstrap import bootstrap
from services.command.quarantine import Quarantine, asked_name, id_name, input_name

SETTINGS = Settings(secret="unit-test-secret")


@pytest.fixture()
def app() -> CommandApp:
    return bootstrap(store=InMemoryEventStore(), registry=toy_registry(), settings=SETTINGS)


def _asked(app: CommandApp, match_id: str) -> tuple[int, list]:
    m = app.matches.get(match_id).match
    seat = HIGHCARD.pending(m.state)[0].seat
    return seat, HIGHCARD.legal_commands(m.state, seat)


def _set_aside(app: CommandApp, match_id: str, seat: int, command_id: str, command) -> None:
    version = app.matches.get(match_id).match.public_version
    app.quarantine.set_aside(match_id, [id_name(seat, command_id), input_name(version, seat, command)])


def _watched(app: CommandApp):  # type: ignore[no-untyped-def]
    """The command service's servicer of `app` and a 1 s watchdog handing its stuck and ended
    calls to it, as the server wires them."""
    from famiglia.grpcutil.watchdog import Watchdog
    from services.command.entrypoints.grpc_server import GameServicer

    servicer = GameServicer(app)
    return servicer, Watchdog(1.0, lambda stuck: None, servicers=[servicer], on_stuck=servicer.set_aside_stuck,
                              on_ended=servicer.lift_ended)


def test_a_command_set_aside_is_refused_under_its_id_and_under_a_new_one(app: CommandApp) -> None:
    match_id = app.create_match("highcard", 2, seed=3, options={"hand": "3"}).match_id
    seat, (poisoned, fine, *_) = _asked(app, match_id)
    _set_aside(app, match_id, seat, "loops-1", poisoned)
    for command_id in ("loops-1", "loops-2"):
        with pytest.raises(FailedPrecondition) as refused:
            app.submit(match_id, Viewer(seat), command_id, poisoned)
        assert refused.value.code == "command_quarantined"
        assert repr(command_id) in refused.value.message and "cancel the match" in refused.value.message
    assert app.store.version(match_id) == app.matches.get(match_id).match.version  # nothing stored
    # The same id for another command is the same call retried: refused too (no answer was given).
    with pytest.raises(FailedPrecondition):
        app.submit(match_id, Viewer(seat), "loops-1", fine)
    assert not app.submit(match_id, Viewer(seat), "fine-1", fine).duplicate  # another command plays


def test_the_same_command_once_the_match_moved_on_is_decided(app: CommandApp) -> None:
    """The set-aside names stay; the match moves on (the seat plays another card, then the other
    seat), and the same command under a new id is another input to `decide`: decided. Under the
    stuck call's id it is still refused."""
    match_id = app.create_match("highcard", 2, seed=3, options={"hand": "3"}).match_id
    seat, (poisoned, fine, *_) = _asked(app, match_id)
    _set_aside(app, match_id, seat, "loops-1", poisoned)
    app.submit(match_id, Viewer(seat), "fine-1", fine)
    other, (card, *_) = _asked(app, match_id)
    app.submit(match_id, Viewer(other), "o-1", card)
    again, legal = _asked(app, match_id)
    assert again == seat and poisoned in legal  # the seat asked again, the card still in hand
    assert app.quarantine.of(match_id) is not None  # still set aside
    with pytest.raises(FailedPrecondition):
        app.submit(match_id, Viewer(seat), "loops-1", poisoned)
    assert not app.submit(match_id, Viewer(seat), "loops-2", poisoned).duplicate


def test_a_command_taken_after_all_is_answered_as_a_duplicate(app: CommandApp) -> None:
    """A stuck call that ended and stored its command: its client's retry gets the answer."""
    match_id = app.create_match("highcard", 2, seed=3, options={"hand": "3"}).match_id
    seat, (command, *_) = _asked(app, match_id)
    version = app.matches.get(match_id).match.public_version
    taken = app.submit(match_id, Viewer(seat), "slow-1", command)
    app.quarantine.set_aside(match_id, [id_name(seat, "slow-1"), input_name(version, seat, command)])
    again = app.submit(match_id, Viewer(seat), "slow-1", command)
    assert again.duplicate and again.version == taken.version


def test_a_quarantine_ends_by_itself() -> None:
    now = [1000.0]
    aside = Quarantine(ttl_s=60.0, refresh_s=0.0, wall=lambda: now[0])
    aside.set_aside("m1", ["id:0/c1"])
    assert aside.of("m1") == frozenset({"id:0/c1"}) and aside.of("m2") is None
    now[0] += 61
    assert aside.of("m1") is None


@pytest.mark.parametrize("ttl", [0.0, -1.0])
def test_a_quarantine_of_no_time_is_refused(ttl: float) -> None:
    with pytest.raises(ValueError, match="more than 0"):
        Quarantine(ttl_s=ttl)


def test_a_stuck_call_that_ended_before_its_frames_were_read_blames_nothing_its_thread_does_next() -> None:
    """The watchdog finds a call stuck from its slot, then the service reads the thread's frames.
    A call that ended in between (slow, not endless) has its thread on the next call: that one's
    command, if it is deciding, is not the stuck one and must not be set aside (for every
    replica, however briefly)."""
    from famiglia.grpcutil.watchdog import RUNNING, Running
    from famiglia.testgames.stalling import GAME_ID, StallingCard, stalling_registry
    from services.command.entrypoints.grpc_server import GameServicer

    engine = StallingCard(60.0)
    app = bootstrap(store=InMemoryEventStore(), registry=stalling_registry(engine), settings=SETTINGS)
    servicer = GameServicer(app)
    match_id = app.create_match(GAME_ID, 2, seed=3).match_id
    seat, (command, *_) = _asked(app, match_id)
    deciding = threading.Thread(target=lambda: app.submit(match_id, Viewer(seat), "next-1", command), daemon=True)
    deciding.start()
    try:
        assert engine.entered.wait(30)  # the thread's next call, deciding
        ident = deciding.ident
        assert ident is not None
        found_stuck = Running(0.0, servicer, "SubmitCommand", object(), None)  # the call it ran before
        RUNNING[ident] = (100.0, servicer, "SubmitCommand", object(), None)  # its slot: the next call's
        servicer.set_aside_stuck(ident, found_stuck)
        assert app.quarantine.of(match_id) is None
        # The same call still in its slot: its command is set aside.
        RUNNING[ident] = tuple(found_stuck)
        servicer.set_aside_stuck(ident, found_stuck)
        assert app.quarantine.of(match_id) is not None
    finally:
        engine.release.set()
        deciding.join(30)
        RUNNING.pop(deciding.ident, None)


def test_a_command_id_with_spaces_is_set_aside_under_its_whole_id(app: CommandApp) -> None:
    """A command_id may hold spaces ("play card 3"); the set's members are "<match id> <name>".
    Split at the id's last space, the member named another match and a cut id: the retry of the
    same call, with the match moved on (where the command's input differs), was decided again."""
    match_id = app.create_match("highcard", 2, seed=3, options={"hand": "3"}).match_id
    seat, (poisoned, fine, *_) = _asked(app, match_id)
    app.quarantine.set_aside(match_id, [id_name(seat, "loops 1")])
    assert app.quarantine.of(match_id) == frozenset({id_name(seat, "loops 1")})
    with pytest.raises(FailedPrecondition) as refused:
        app.submit(match_id, Viewer(seat), "loops 1", fine)  # the same call: refused whatever it carries
    assert refused.value.code == "command_quarantined"


def test_a_set_aside_command_of_a_cancelled_match_is_told_the_match_is_over(app: CommandApp) -> None:
    """The runbook's way out is to cancel the match, so its bots and clients stop sending the
    command. Their retries were still told `command_quarantined` ("ask an operator to cancel the
    match"), the match cancelled already, rather than `match_over`, which they stop on."""
    match_id = app.create_match("highcard", 2, seed=3, options={"hand": "3"}).match_id
    seat, (poisoned, *_) = _asked(app, match_id)
    _set_aside(app, match_id, seat, "loops-1", poisoned)
    app.cancel_match(match_id, "cli", "engine loops on a card")
    for command_id in ("loops-1", "loops-2"):
        with pytest.raises(FailedPrecondition) as refused:
            app.submit(match_id, Viewer(seat), command_id, poisoned)
        assert refused.value.code == "match_over" and "engine loops" in refused.value.message


def test_a_stuck_command_is_set_aside_everywhere_before_the_sdks_retry_arrives() -> None:
    """The SDK retries a call whose deadline ran out (DEADLINE_EXCEEDED) on the next replica. With
    the bound at the SDK's deadline (30 s both), that retry usually arrived before the watchdog had
    found the call stuck, and was decided, and stalled, there too. By default a command is found
    stuck at the bound (and the watchdog's round at worst), set aside (a write of at most
    `REDIS_TIMEOUT_S`, after a command's read round of the set that holds the write lock, as long
    again) and read so by every replica (a round of `REFRESH_S`) before the deadline."""
    import inspect

    from famiglia.client.game_client import GameClient
    from famiglia.grpcutil.watchdog import ROUND_S
    from services.command.entrypoints.grpc_server import STUCK_CALL_S
    from services.command.quarantine import REDIS_TIMEOUT_S, REFRESH_S

    deadline_s = inspect.signature(GameClient).parameters["timeout"].default
    assert STUCK_CALL_S + ROUND_S + 2 * REDIS_TIMEOUT_S + REFRESH_S < deadline_s


def test_a_stuck_call_that_waited_for_its_matchs_lock_and_then_loops_is_set_aside() -> None:
    """A call found stuck while it waited for its match's lock (behind a slow command) decides
    nothing then, and was told once: when it went on to loop in `decide`, its command was never
    set aside, and its client's retry stalled the next replica. The watchdog asks again each
    round (`set_aside_stuck` False) until the call decides, or ends."""
    from famiglia.grpcutil.watchdog import RUNNING
    from famiglia.testgames.stalling import GAME_ID, StallingCard, stalling_registry

    engine = StallingCard(60.0)
    app = bootstrap(store=InMemoryEventStore(), registry=stalling_registry(engine), settings=SETTINGS)
    servicer, watchdog = _watched(app)
    match_id = app.create_match(GAME_ID, 2, seed=3).match_id
    seat, (command, *_) = _asked(app, match_id)
    lock = app.matches.get(match_id).lock
    lock.acquire()  # a slow command holds the match
    held = True
    deciding = threading.Thread(target=lambda: app.submit(match_id, Viewer(seat), "late-1", command), daemon=True)
    deciding.start()
    ident = deciding.ident
    assert ident is not None
    RUNNING[ident] = (0.0, servicer, "SubmitCommand", object(), None)
    try:
        assert watchdog.check(now=5.0) == 1
        assert app.quarantine.of(match_id) is None  # waiting: nothing of the command to blame yet
        lock.release()
        held = False
        assert engine.entered.wait(30)  # now it loops in `decide`
        watchdog.check(now=6.0)
        assert app.quarantine.of(match_id) is not None
        engine.release.set()
        deciding.join(30)
        RUNNING[ident] = None  # the call ended after all: what it set aside is lifted
        assert watchdog.check(now=7.0) == 0
        assert app.quarantine.of(match_id) is None
    finally:
        if held:
            lock.release()
        engine.release.set()
        deciding.join(30)
        RUNNING.pop(ident, None)


def test_a_chain_that_loops_on_a_later_entry_than_the_one_set_aside_has_that_one_set_aside(app: CommandApp) -> None:
    """A SubmitCommands chain found stuck on a slow entry had that entry set aside, and was
    never looked at again: when a later entry looped, nothing was set aside for it (the retry
    stalled the next replica), and the slow entry, long decided, stayed set aside until the
    call ended, that is for ever. Each round looks at what the call decides now."""
    from famiglia.grpcutil.watchdog import RUNNING

    servicer, watchdog = _watched(app)
    deciding: list = [("m1", ["id:0/slow-1"], {}), ("m1", ["id:1/loops-2"], {})]
    app.stuck_command = lambda ident: deciding[0]  # type: ignore[method-assign] # what its frames show
    ident = -7  # a thread of the test's making: its slot only
    RUNNING[ident] = (0.0, servicer, "SubmitCommands", object(), None)
    try:
        watchdog.check(now=5.0)
        assert app.quarantine.of("m1") == frozenset({"id:0/slow-1"})
        deciding.pop(0)  # the slow entry decided and stored; the next one loops
        watchdog.check(now=6.0)
        assert app.quarantine.of("m1") == frozenset({"id:1/loops-2"})
        RUNNING[ident] = None
        watchdog.check(now=7.0)
        assert app.quarantine.of("m1") is None
    finally:
        RUNNING.pop(ident, None)


def test_a_set_aside_whose_answer_redis_did_not_send_is_lifted_as_the_call_ends(app: CommandApp) -> None:
    """A set-aside Redis made but did not answer (its reply past the client's timeout) raised,
    and nothing was noted of it: the call, slow and not endless, ended before the next round
    wrote it again, and its members stayed set aside for the quarantine's 6 hours, the call's
    own retry refused though its command was stored. What a call is to set aside is noted
    before the write, so its end lifts it whatever the write answered."""
    from famiglia.grpcutil.watchdog import RUNNING

    servicer, watchdog = _watched(app)
    app.stuck_command = lambda ident: ("m1", ["id:0/slow-1"], {})  # type: ignore[method-assign]
    made = app.quarantine.set_aside

    def made_unanswered(*args: object) -> None:
        made(*args)  # (written: Redis has it)
        raise TimeoutError("Timeout reading from socket")  # (its answer lost on the way)

    app.quarantine.set_aside = made_unanswered  # type: ignore[method-assign]
    ident = -8  # a thread of the test's making: its slot only
    RUNNING[ident] = (0.0, servicer, "SubmitCommand", object(), None)
    try:
        watchdog.check(now=5.0)
        assert app.quarantine.of("m1") == frozenset({"id:0/slow-1"})
        RUNNING[ident] = None  # ended after all, before the next round wrote it again
        assert watchdog.check(now=6.0) == 0
        assert app.quarantine.of("m1") is None
    finally:
        RUNNING.pop(ident, None)


def test_a_set_aside_redis_refused_is_made_again_next_round_and_once(app: CommandApp) -> None:
    """A set-aside noted before its write is still made again while the write fails, and once
    it is made, not again each round."""
    from famiglia.grpcutil.watchdog import RUNNING

    servicer, watchdog = _watched(app)
    app.stuck_command = lambda ident: ("m1", ["id:0/loops-1"], {})  # type: ignore[method-assign]
    made = app.quarantine.set_aside
    writes: list[bool] = []

    def refused_once(*args: object) -> float:
        writes.append(True)
        if len(writes) == 1:
            raise ConnectionError("Redis away")
        return made(*args)

    app.quarantine.set_aside = refused_once  # type: ignore[method-assign]
    ident = -9
    RUNNING[ident] = (0.0, servicer, "SubmitCommand", object(), None)
    try:
        watchdog.check(now=5.0)
        assert app.quarantine.of("m1") is None
        watchdog.check(now=6.0)
        assert app.quarantine.of("m1") == frozenset({"id:0/loops-1"})
        watchdog.check(now=7.0)
        assert len(writes) == 2
    finally:
        RUNNING.pop(ident, None)


@pytest.mark.parametrize(("ttl", "said"), [(6 * 3600.0, "6 h"), (600.0, "10 min"), (45.0, "45 s"), (5400.0, "1.5 h"),
                                           (3599.0, "1 h"), (59.99, "1 min"), (3500.0, "58.3 min")])
def test_a_quarantines_length_is_told_in_a_unit_a_player_reads(ttl: float, said: str) -> None:
    """FAMIGLIA_COMMAND_QUARANTINE_S of ten minutes was told "refused for up to 0.166667 h"."""
    app = bootstrap(store=InMemoryEventStore(), registry=toy_registry(), settings=SETTINGS)
    app.quarantine = Quarantine(ttl_s=ttl)
    match_id = app.create_match("highcard", 2, seed=3, options={"hand": "3"}).match_id
    seat, (poisoned, *_) = _asked(app, match_id)
    _set_aside(app, match_id, seat, "loops-1", poisoned)
    with pytest.raises(FailedPrecondition) as refused:
        app.submit(match_id, Viewer(seat), "loops-1", poisoned)
    assert f"for up to {said} so" in refused.value.message


def test_a_call_stuck_longer_than_the_quarantine_keeps_its_command_set_aside(app: CommandApp) -> None:
    """A call stuck past FAMIGLIA_COMMAND_QUARANTINE_S (a replica nobody restarts) let its members
    expire while it was still stuck, and the watchdog's repeat look did not renew them: the
    command was decided again elsewhere and wedged another replica. A still-stuck call's
    members are written again (a new expiry; only ever grows) once past half their life, and
    only then: the rounds between are no write to Redis."""
    from famiglia.grpcutil.watchdog import RUNNING

    wall = [1000.0]
    app.quarantine = Quarantine(ttl_s=100.0, refresh_s=0.0, wall=lambda: wall[0])
    servicer, watchdog = _watched(app)
    app.stuck_command = lambda ident: ("m1", ["id:0/loops-1"], {})  # type: ignore[method-assign]
    made = app.quarantine.set_aside
    writes: list[float] = []

    def counted(*args: object) -> float:
        writes.append(wall[0])
        return made(*args)

    app.quarantine.set_aside = counted  # type: ignore[method-assign]
    ident = -10
    RUNNING[ident] = (0.0, servicer, "SubmitCommand", object(), None)
    try:
        for second in range(0, 241, 5):  # a round every 5 s of the clock, for four minutes
            wall[0] = 1000.0 + second
            watchdog.check(now=5.0 + second)
            assert app.quarantine.of("m1") == frozenset({"id:0/loops-1"}), second
        assert writes == [1000.0, 1050.0, 1100.0, 1150.0, 1200.0]  # once past half their life
        RUNNING[ident] = None
        watchdog.check(now=300.0)
        assert app.quarantine.of("m1") is None
    finally:
        RUNNING.pop(ident, None)


def test_closing_waits_a_bounded_time_for_a_write_under_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """The service's exit (a stuck one's too) closes the app after the drain, and the quarantine's
    close, with a lift pending, waited as long as it took for the watchdog's write under way to
    end: on a Redis that hangs, one write after another. It waits `REDIS_TIMEOUT_S` at most now."""
    import services.command.quarantine as quarantine

    class _Client:
        connection_pool = type("Pool", (), {"connection_kwargs": {}, "connection_class": None})()

    monkeypatch.setattr(quarantine, "_bounded", lambda client: _Unanswered())
    monkeypatch.setattr(quarantine, "REDIS_TIMEOUT_S", 0.05)
    q = Quarantine(_Client())
    q._lifting.add("m1 h.7 id:0/slow-1")
    q._writing.acquire()  # the watchdog's write, waiting on Redis
    closing = threading.Thread(target=q.close, daemon=True)
    try:
        closing.start()
        closing.join(30)
        assert not closing.is_alive()
    finally:
        q._writing.release()


class _Unanswered:
    """A Redis client whose server does not answer (only what a Quarantine asks of it)."""

    connection_pool = type("Pool", (), {"disconnect": lambda self: None})()

    def register_script(self, script: str) -> object:
        return lambda **kwargs: 0  # (Redis's clock, as the set-aside answers it)

    def zrem(self, *args: object) -> None:
        raise TimeoutError("Timeout reading from socket")


def test_a_write_to_a_redis_that_hangs_gives_up_after_one_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """The quarantine's client (`_bounded`) copied the store's connection settings, redis-py's
    retries with them (10, backing off up to seconds): a ZREM on a Redis that accepts and never
    answers took 25 s, not `REDIS_TIMEOUT_S` (2 s), holding the watchdog's hooks, a command's
    read round and the exit. It makes one try: one connection, one wait."""
    import socket

    import redis

    import services.command.quarantine as quarantine

    monkeypatch.setattr(quarantine, "REDIS_TIMEOUT_S", 0.05)
    hanging = socket.create_server(("127.0.0.1", 0))
    hanging.settimeout(0.05)
    accepted: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                accepted.append(hanging.accept()[0])  # and never a byte back
            except TimeoutError:
                continue

    accepting = threading.Thread(target=accept, daemon=True)
    accepting.start()
    store = redis.Redis(host="127.0.0.1", port=hanging.getsockname()[1])  # redis-py's own retries
    q = Quarantine(store)
    try:
        with pytest.raises(redis.TimeoutError):
            q.set_aside("m1", ["id:0/slow-1"], "7")
        assert len(accepted) == 1, f"{len(accepted)} connections for one write"
    finally:
        q.close()
        done.set()
        accepting.join(30)
        hanging.close()
        for conn in accepted:
            conn.close()


def test_closing_cuts_no_write_under_way_even_with_no_lift_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    """Close waited for the watchdog's write under way only with a lift pending: with none, it
    disconnected the pool at once, in-use connections too, and a set-aside Redis was about to
    make (a call still stuck as the service leaves) was cut off mid-write. It waits for it
    (`REDIS_TIMEOUT_S` at most) before disconnecting."""
    import services.command.quarantine as quarantine

    answer, closer, writing_now = threading.Event(), threading.Event(), threading.Event()
    disconnected_mid_write: list[bool] = []

    class _Slow(_Unanswered):
        def __init__(self) -> None:
            self.connection_pool = type("Pool", (), {})()
            self.connection_pool.disconnect = lambda: disconnected_mid_write.append(writing_now.is_set())

        def register_script(self, script: str) -> object:
            def script(**kwargs: object) -> int:
                writing_now.set()
                answer.wait(30)  # Redis answers once close waits for it
                writing_now.clear()
                return 0

            return script

    class _Watched:
        """The quarantine's write lock, telling when the closing thread asks for it."""

        def __init__(self, inner: threading.Lock) -> None:
            self.inner = inner

        def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
            if closer.is_set():
                answer.set()
            return self.inner.acquire(blocking, timeout)

        def release(self) -> None:
            self.inner.release()

        def locked(self) -> bool:
            return self.inner.locked()

        def __enter__(self) -> bool:
            return self.acquire()

        def __exit__(self, *exc: object) -> None:
            self.release()

    class _Client:
        connection_pool = type("Pool", (), {"connection_kwargs": {}, "connection_class": None})()

    monkeypatch.setattr(quarantine, "_bounded", lambda client: _Slow())
    monkeypatch.setattr(quarantine, "REDIS_TIMEOUT_S", 30.0)
    q = Quarantine(_Client())
    q._writing = _Watched(q._writing)  # type: ignore[assignment]
    writer = threading.Thread(target=q.set_aside, args=("m1", ["id:0/slow-1"], "7"), daemon=True)
    try:
        writer.start()
        assert writing_now.wait(30)  # the write under way
        closer.set()
        q.close()
        answer.set()
        writer.join(30)
        assert disconnected_mid_write == [False]
    finally:
        answer.set()


# -- a seat's view or legal commands the engine did not return ----------------------------------


def _set_aside_asked(app: CommandApp, match_id: str, asked: str, seat: int | None) -> None:
    version = app.matches.get(match_id).match.public_version
    app.quarantine.set_aside(match_id, [asked_name(asked, version, seat)])


def test_a_seats_view_set_aside_is_refused_there_and_the_rest_goes_on(app: CommandApp) -> None:
    """A view whose engine loops was asked again by its client's retry on the next replica, and
    the next: every replica taken out in turn, as by a poisoned command. Set aside, it is refused
    at once (`call_quarantined`) for that seat where the match stands; the other seat's view,
    the seat's legal commands, and the seat's view once the match moves on are answered."""
    match_id = app.create_match("highcard", 2, seed=3, options={"hand": "3"}).match_id
    seat, (card, *_) = _asked(app, match_id)
    _set_aside_asked(app, match_id, "view", seat)
    with pytest.raises(FailedPrecondition) as refused:
        app.get_view(match_id, Viewer(seat))
    assert refused.value.code == "call_quarantined"
    assert f"seat {seat}" in refused.value.message and "cancel the match" in refused.value.message
    app.get_view(match_id, Viewer(1 - seat))
    app.get_view(match_id, Viewer(None))
    assert app.legal_commands(match_id, Viewer(seat)).commands
    app.submit(match_id, Viewer(seat), "c-1", card)  # the match moves on
    assert app.get_view(match_id, Viewer(seat)).version > 1


def test_a_seats_legal_commands_set_aside_are_refused_there_and_the_rest_goes_on(app: CommandApp) -> None:
    match_id = app.create_match("highcard", 2, seed=3, options={"hand": "3"}).match_id
    seat, (card, *_) = _asked(app, match_id)
    _set_aside_asked(app, match_id, "legal", seat)
    with pytest.raises(FailedPrecondition) as refused:
        app.legal_commands(match_id, Viewer(seat))
    assert refused.value.code == "call_quarantined" and "legal commands" in refused.value.message
    app.get_view(match_id, Viewer(seat))
    assert app.legal_commands(match_id, Viewer(1 - seat)).commands == []  # not its turn: answered
    app.submit(match_id, Viewer(seat), "c-1", card)
    other, (card, *_) = _asked(app, match_id)
    app.submit(match_id, Viewer(other), "o-1", card)
    assert app.legal_commands(match_id, Viewer(seat)).commands  # the next version: asked again


def test_a_spectators_view_set_aside_is_refused_to_spectators_only(app: CommandApp) -> None:
    match_id = app.create_match("highcard", 2, seed=3, options={"hand": "3"}).match_id
    _set_aside_asked(app, match_id, "view", None)
    with pytest.raises(FailedPrecondition) as refused:
        app.get_view(match_id, Viewer(None))
    assert refused.value.code == "call_quarantined" and "a spectator" in refused.value.message
    app.get_view(match_id, Viewer(0))


def test_a_chains_next_answer_leaves_out_a_seat_whose_view_or_legal_commands_are_set_aside() -> None:
    """SubmitCommands' `ask_next` asks the engine the same view and legal commands (the bots'
    worker): a seat set aside there is left out of `next` (its own GetView or ListLegalCommands
    says why), not asked again."""
    from services.command.app import NextSeat

    app = bootstrap(store=InMemoryEventStore(), registry=toy_registry(), settings=SETTINGS)
    created = app.create_match("highcard", 2, seed=3, options={"hand": "3"})
    seat, _ = _asked(app, created.match_id)
    asking = [NextSeat(created.seat_tokens[seat])]
    assert [n.seat for n in app.submit_chain(created.match_id, [], ask_next=asking).next] == [seat]
    for asked in ("view", "legal"):
        q = app.quarantine = Quarantine(refresh_s=0.0)
        _set_aside_asked(app, created.match_id, asked, seat)
        assert app.submit_chain(created.match_id, [], ask_next=asking).next == [], asked
        q.close()
    # Without its view, a seat whose view alone is set aside is answered.
    app.quarantine = Quarantine(refresh_s=0.0)
    _set_aside_asked(app, created.match_id, "view", seat)
    answered = app.submit_chain(created.match_id, [], ask_next=[NextSeat(created.seat_tokens[seat], view=False)])
    assert [n.seat for n in answered.next] == [seat]


@pytest.mark.parametrize("asked", ["view", "legal_commands"])
def test_a_call_stuck_in_a_seats_view_or_legal_commands_sets_that_aside_until_it_ends(asked: str) -> None:
    """Only a call stuck in `decide` was set aside: one stuck in the engine's view or legal
    commands set nothing aside, and its client's retry took out the next replica. Found there, it
    sets aside what it asked, for its seat where the match stands; ended after all, it lifts it."""
    from famiglia.grpcutil.watchdog import RUNNING
    from famiglia.testgames.stalling import GAME_ID, StallingCard, stalling_registry

    engine = StallingCard(60.0, stalls_in=asked)
    app = bootstrap(store=InMemoryEventStore(), registry=stalling_registry(engine), settings=SETTINGS)
    servicer, watchdog = _watched(app)
    match_id = app.create_match(GAME_ID, 2, seed=3).match_id
    seat, _ = _asked(app, match_id)
    engine.poisoned_seat = seat
    ask = app.get_view if asked == "view" else app.legal_commands
    asking = threading.Thread(target=lambda: ask(match_id, Viewer(seat)), daemon=True)
    asking.start()
    ident = asking.ident
    assert ident is not None
    RUNNING[ident] = (0.0, servicer, "GetView", object(), None)
    try:
        assert engine.entered.wait(30)
        with structlog.testing.capture_logs() as captured:
            watchdog.check(now=5.0)
        name = asked_name("view" if asked == "view" else "legal", app.matches.get(match_id).match.public_version, seat)
        assert app.quarantine.of(match_id) == frozenset({name})
        # Its own line: no command was set aside (`command_quarantined` is a command's).
        assert [line["event"] for line in captured if "quarantine" in line["event"]] == ["call_quarantined"]
        (line,) = [line for line in captured if line["event"] == "call_quarantined"]
        assert (line["match_id"], line["seat"], line["asked"]) == (match_id, seat, name.partition(":")[0]), line
        engine.release.set()
        asking.join(30)
        RUNNING[ident] = None
        with structlog.testing.capture_logs() as captured:
            watchdog.check(now=6.0)
        assert app.quarantine.of(match_id) is None
        assert [line["event"] for line in captured if "quarantine" in line["event"]] == ["call_quarantine_lifted"]
    finally:
        engine.release.set()
        asking.join(30)
        RUNNING.pop(ident, None)


def _stalling_in(engine, name: str, thread_name: str):  # type: ignore[no-untyped-def]
    """`engine` whose `name` stalls, as one that loops would, only in the thread `thread_name`
    (the match is created, and its commands decided, as ever)."""
    method = getattr(engine, name)

    def stalling(*args, **kwargs):  # type: ignore[no-untyped-def]
        if threading.current_thread().name == thread_name:
            engine._stall()
        return method(*args, **kwargs)

    setattr(engine, name, stalling)


@pytest.mark.parametrize(("ask", "loops_in", "options", "over"), [
    ("view", "pending", {}, False),
    ("view", "result", {}, False),
    ("view", "render_state", {}, True),
    ("view", "pending", {"clock_s": "30"}, True),  # a match over: no one asked, its whole state shown
    ("legal", "render_command", {}, False),
    ("legal", "pending", {"clock_s": "30"}, False),  # the seat's clock
])
def test_a_call_stuck_in_any_engine_call_of_a_view_or_legal_commands_is_found_there(
        ask: str, loops_in: str, options: dict[str, str], over: bool) -> None:
    """Only a loop in the engine's `view` or `legal_commands` was found: GetView asks the engine who
    is asked, the result and a match over's whole state too, ListLegalCommands each command as
    text and the seat's clock; a loop in one of those set nothing aside, and the client's retry
    took out the next replica. Each is found as the seat's view (legal commands) where the match stands."""
    from famiglia.testgames.stalling import GAME_ID, StallingCard, stalling_registry

    engine = StallingCard(60.0, stalls_in="view", poisoned_seat=-2)  # decides at once; stalls where told
    app = bootstrap(store=InMemoryEventStore(), registry=stalling_registry(engine), settings=SETTINGS)
    match_id = app.create_match(GAME_ID, 2, seed=3, options={"hand": "1", **options}).match_id
    seat, _ = _asked(app, match_id)
    if over:
        for n in range(2):
            asked, (card, *_) = _asked(app, match_id)
            app.submit(match_id, Viewer(asked), f"c-{n}", card)
        assert app.matches.get(match_id).match.finished
    _stalling_in(engine, loops_in, "asking")
    call = app.get_view if ask == "view" else app.legal_commands
    with _stuck_asking(app, engine, lambda: call(match_id, Viewer(seat))) as found:
        version = app.matches.get(match_id).match.public_version
        assert found is not None, f"a loop in {loops_in} set nothing aside"
        assert found[:2] == (match_id, [asked_name(ask, version, seat)])
        assert (found[2]["asked"], found[2]["seat"]) == (ask, seat)


def test_a_view_set_aside_on_a_match_over_does_not_ask_for_a_cancel(app: CommandApp) -> None:
    """A match over is not cancelled (`match_over`): its refusal told the player to ask for that."""
    match_id = app.create_match("highcard", 2, seed=3, options={"hand": "1"}).match_id
    for n in range(2):
        seat, (card, *_) = _asked(app, match_id)
        app.submit(match_id, Viewer(seat), f"c-{n}", card)
    assert app.matches.get(match_id).match.finished
    _set_aside_asked(app, match_id, "view", 0)
    with pytest.raises(FailedPrecondition) as refused:
        app.get_view(match_id, Viewer(0))
    assert refused.value.code == "call_quarantined"
    assert "cancel the match" not in refused.value.message and "is over" in refused.value.message, \
        refused.value.message


# -- SubmitCommands' `ask_next` and ListMyTurns: the engine's other answers ------------------------


@contextmanager
def _stuck_asking(app: CommandApp, engine, call: Callable[[], object]):  # type: ignore[no-untyped-def]
    """`call` run in a thread named "asking" until the engine stalls in it: what the app says that
    thread is stuck in (the engine released, the thread ended, at the end)."""
    thread = threading.Thread(target=call, name="asking", daemon=True)
    thread.start()
    try:
        assert engine.entered.wait(30), "the call never reached the engine's stall"
        assert thread.ident is not None
        yield app.stuck_command(thread.ident)
    finally:
        engine.release.set()
        thread.join(30)


def _stalling_after(engine, name: str, thread_name: str, calls: int):  # type: ignore[no-untyped-def]
    """`engine` whose `name` stalls in the thread `thread_name` from its call after the first `calls`
    there (a later call of a function the call makes more than once)."""
    method = getattr(engine, name)
    made = [0]

    def stalling(*args, **kwargs):  # type: ignore[no-untyped-def]
        if threading.current_thread().name == thread_name:
            made[0] += 1
            if made[0] > calls:
                engine._stall()
        return method(*args, **kwargs)

    setattr(engine, name, stalling)


def _players_match(app: CommandApp, options: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    """A Stalling Card match of "ann" (seat 0) and "bob" (seat 1)."""
    from famiglia.testgames.stalling import GAME_ID
    from famiglia.v1 import envelope_pb2

    seating = [envelope_pb2.SeatInfo(seat=0, player_id="ann"), envelope_pb2.SeatInfo(seat=1, player_id="bob")]
    return app.create_match(GAME_ID, 2, seed=3, options={"hand": "2", **(options or {})}, seat_info=seating)


@pytest.mark.parametrize(("calls", "options"), [
    (0, {}),  # who is asked
    (1, {"clock_s": "30"}),  # the seats' clocks, wound over who is asked
])
def test_a_chain_stuck_in_who_is_asked_or_their_clocks_sets_aside_the_asked_seats_legal_commands(
        calls: int, options: dict[str, str]) -> None:
    """SubmitCommands' `ask_next` asks the engine who is asked and each seat's clock, beside the
    seats' views and legal commands: a loop there was found nowhere (`stuck_command`), nothing was
    set aside, and the bots worker's retry took out the next replica. Found there, it sets aside the
    legal commands of every seat asked (the `next` answer's part its clock is, as ListLegalCommands'),
    so that the retry leaves them out of `next` and asks the engine nothing."""
    from famiglia.testgames.stalling import StallingCard, stalling_registry
    from services.command.app import NextSeat

    engine = StallingCard(60.0, stalls_in="view", poisoned_seat=-2)  # decides at once; stalls where told
    app = bootstrap(store=InMemoryEventStore(), registry=stalling_registry(engine), settings=SETTINGS)
    created = _players_match(app, options)
    asking = [NextSeat(token) for token in created.seat_tokens]
    _stalling_after(engine, "pending", "asking", calls)
    with _stuck_asking(app, engine, lambda: app.submit_chain(created.match_id, [], ask_next=asking)) as found:
        version = app.matches.get(created.match_id).match.public_version
        assert found is not None, "a loop in who is asked set nothing aside"
        assert found[:2] == (created.match_id, [asked_name("legal", version, 0), asked_name("legal", version, 1)])
        assert (found[2]["asked"], found[2]["seats"]) == ("legal", [0, 1])


def test_a_chain_whose_asked_seats_are_all_set_aside_asks_the_engine_nothing() -> None:
    """The retry of a chain stuck in who is asked: every seat it asks set aside, it is answered with
    an empty `next` at once; before, it asked the engine who is asked again, and looped there."""
    from famiglia.testgames.stalling import StallingCard, stalling_registry
    from services.command.app import NextSeat

    engine = StallingCard(60.0, stalls_in="view", poisoned_seat=-2)
    app = bootstrap(store=InMemoryEventStore(), registry=stalling_registry(engine), settings=SETTINGS)
    app.quarantine = Quarantine(refresh_s=0.0)
    created = _players_match(app)
    for seat in (0, 1):
        _set_aside_asked(app, created.match_id, "legal", seat)
    pending = engine.pending
    asked: list[object] = []
    engine.pending = lambda state: asked.append(state) or pending(state)  # type: ignore[method-assign]
    answer = app.submit_chain(created.match_id, [], ask_next=[NextSeat(t) for t in created.seat_tokens])
    assert answer.next == [] and answer.next_version == app.matches.get(created.match_id).match.public_version
    assert asked == [], "the engine was asked who is asked"


def test_list_my_turns_stuck_in_a_seats_turn_sets_aside_that_seats_view() -> None:
    """ListMyTurns asks the engine, for each of the player's seats, what its GetView would say of its
    turn (who is asked, its clock): a loop there was found nowhere, and the player's app, retrying,
    took out every replica in turn. Found there, it sets aside that seat's view where the match
    stands, as GetView stuck in the same calls does."""
    from famiglia.testgames.stalling import StallingCard, stalling_registry

    engine = StallingCard(60.0, stalls_in="view", poisoned_seat=-2)
    app = bootstrap(store=InMemoryEventStore(), registry=stalling_registry(engine), settings=SETTINGS)
    match_id = _players_match(app).match_id
    _stalling_after(engine, "pending", "asking", 0)
    with _stuck_asking(app, engine, lambda: app.my_turns("bob")) as found:
        version = app.matches.get(match_id).match.public_version
        assert found is not None, "a loop in ListMyTurns set nothing aside"
        assert found[:2] == (match_id, [asked_name("view", version, 1)])
        assert (found[2]["asked"], found[2]["seat"]) == ("view", 1)


def test_list_my_turns_tells_nothing_of_a_seat_whose_view_is_set_aside_and_asks_the_engine_nothing() -> None:
    """The seat stays listed (its GetView says why it is refused), not asked and without a clock, as
    the engine said nothing of it; the player's other matches are told as ever."""
    from famiglia.testgames.stalling import StallingCard, stalling_registry

    engine = StallingCard(60.0, stalls_in="view", poisoned_seat=-2)
    app = bootstrap(store=InMemoryEventStore(), registry=stalling_registry(engine), settings=SETTINGS)
    app.quarantine = Quarantine(refresh_s=0.0)
    stuck, other = _players_match(app).match_id, _players_match(app).match_id
    seat = engine.pending(app.matches.get(stuck).match.state)[0].seat
    player = ("ann", "bob")[seat]
    _set_aside_asked(app, stuck, "view", seat)
    asked: list[object] = []
    pending = engine.pending
    engine.pending = lambda state: asked.append(state) or pending(state)  # type: ignore[method-assign]
    turns = {turn.match_id: turn for turn in app.my_turns(player)}
    assert len(asked) == 1, "the engine was asked of the seat set aside"
    assert (turns[stuck].to_act, turns[stuck].deadline_ms, turns[stuck].seat) == (False, 0, seat)
    assert turns[other].to_act and turns[other].seat == seat
