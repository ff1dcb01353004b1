"""Turn notifications (services/bots/notices.py, famiglia.eventstore.turn_notices): the dispatcher
tells each person, in its own stream, when its seat is asked and when its match ends, once; a
bot's seat, a seat the bots play and a match of bots only are never told, and a private ask
reaches its own seat's player only. On the in-memory store, the real engines."""

from __future__ import annotations

import random
import time

import pytest

from famiglia.config import Settings
from famiglia.engine.registry import default_registry
from famiglia.eventstore.envelopes import seat_change_envelope
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.eventstore.turn_notices import (
    MATCH_OVER,
    TTL_SECONDS,
    YOUR_TURN,
    InMemoryTurnNotices,
    StoredNotice,
    TurnNotice,
)
from famiglia.v1 import envelope_pb2
from services.bots.dispatcher import Dispatcher
from services.bots.notices import look, turn_notices, watch_for
from services.command.app import Viewer
from services.command.bootstrap import bootstrap as command_bootstrap
from tests.support.tasks import NoTasks

ANN, BOB, CAT = "ann", "bob", "cat"


class Table:
    """A command service and a dispatcher (with turn notifications) on one in-memory store."""

    def __init__(self, notices: InMemoryTurnNotices | None = None) -> None:
        self.store = InMemoryEventStore()
        self.registry = default_registry()
        self.app = command_bootstrap(store=self.store, registry=self.registry, settings=Settings(secret="t"))
        self.notices = notices if notices is not None else InMemoryTurnNotices()
        self.dispatcher = self.new_dispatcher()
        self.seen: dict[str, int] = {}

    def new_dispatcher(self) -> Dispatcher:
        return Dispatcher(self.store, self.registry, NoTasks(), notices=self.notices)

    def create(self, game: str, seats: int, seed: int, people: dict[int, str], bots: tuple[int, ...] = ()):
        info = [envelope_pb2.SeatInfo(seat=s, player_id=p) for s, p in people.items()]
        info += [envelope_pb2.SeatInfo(seat=s, bot=True, policy="random") for s in bots]
        created = self.app.create_match(game, seats, seed=seed, seat_info=info)
        self.pump(created.match_id)
        return created

    def pump(self, match_id: str) -> list[StoredNotice]:
        """The dispatcher reads what is new in the match; the notices that made (all players')."""
        before = {p: len(self.notices.read(p)) for p in (ANN, BOB, CAT)}
        envelopes = self.store.read(match_id, after=self.seen.get(match_id, 0))
        if envelopes:
            self.seen[match_id] = envelopes[-1].seq
            self.dispatcher.handle(envelopes)
        return [n for p in (ANN, BOB, CAT) for n in self.notices.read(p)[before[p]:]]

    def asked(self, match_id: str, seat: int) -> bool:
        """Whether the seat's own GetView's to_act names it."""
        return any(p.seat == seat for p in self.app.get_view(match_id, Viewer(seat)).to_act)

    def told(self, player: str) -> list[tuple[str, int, str, int]]:
        return [(n.match_id, n.seat, n.kind, n.version) for n in self.notices.read(player)]


def play(table: Table, created, people: dict[int, str], rng: random.Random, steps: int = 400,
         check=None) -> int:
    """Random legal commands of the seats asked, the dispatcher reading after each; after each,
    every notice made names a seat of its player's, asked as its own GetView says, and a seat is
    told exactly when its ask began: asked now, and not before the command (its own moves inside
    an ask begin none). The notices made of asks."""
    match_id, made = created.match_id, 0
    for i in range(steps):
        m = table.app.matches.get(match_id).match
        if m.finished:
            break
        standing_before = {p.seat for p in m.engine.pending(m.state) if 0 < p.timeout_seconds < 1}
        asked_before = {s for s in people if table.asked(match_id, s)} - standing_before
        seat = rng.choice(sorted({p.seat for p in m.engine.pending(m.state)}))
        viewer = Viewer(seat, bot=True) if seat in m.away else table.app.viewer(match_id, created.seat_tokens[seat])
        command = rng.choice(table.app.legal_commands(match_id, viewer).commands)
        table.app.submit(match_id, viewer, f"c{i}", command)
        notices = table.pump(match_id)
        version = table.store.version(match_id)
        for n in notices:
            if n.kind == YOUR_TURN:
                assert people.get(n.seat) is not None and n.version == version
                assert table.asked(match_id, n.seat), f"{n} told, its seat's GetView does not ask it"
                made += 1
        told_now = {n.seat for n in notices if n.kind == YOUR_TURN}
        m = table.app.matches.get(match_id).match
        standing = {p.seat for p in m.engine.pending(m.state) if 0 < p.timeout_seconds < 1}  # NP-D7's auto-pass
        for s in set(people) - standing:  # an ask that began is told; one going on is not told again
            began = s not in asked_before and table.asked(match_id, s)
            assert (s in told_now) == began, f"seat {s}: ask began at {version}: {began}, told: {s in told_now}"
        if check is not None:
            check(notices)
    return made


# -- who is told what ------------------------------------------------------------------------------
def test_people_are_told_of_their_asks_and_a_bots_seat_never() -> None:
    table = Table()
    people = {0: ANN, 2: BOB}
    created = table.create("goodcritters", 4, seed=3, people=people, bots=(1, 3))
    made = play(table, created, people, random.Random(3), steps=2000)
    assert made > 3
    assert table.app.matches.get(created.match_id).match.finished
    for player, seat in ((ANN, 0), (BOB, 2)):
        told = table.told(player)
        assert {s for _m, s, _k, _v in told} == {seat}
        assert [k for _m, _s, k, _v in told].count(MATCH_OVER) == 1 and told[-1][2] == MATCH_OVER
    assert set(table.notices._streams) == {ANN, BOB}  # the bots' seats: nobody's stream


def test_a_private_ask_is_told_to_its_own_seats_player_only() -> None:
    """A Nothing Personal window asks the seats holding a card privately: each is told in its
    own player's stream, and the others' streams say nothing of it."""
    people = {0: ANN, 1: BOB, 2: CAT}
    private_told = []
    for seed in range(10):
        table = Table()
        created = table.create("nothing_personal", 3, seed=seed, people=people)

        def check(notices: list[StoredNotice], table: Table = table, match_id: str = created.match_id) -> None:
            m = table.app.matches.get(match_id).match
            private = {p.seat for p in m.engine.pending(m.state) if p.private}
            for n in notices:
                assert n.seat == {ANN: 0, BOB: 1, CAT: 2}[_player_of(table, n)]
                if n.seat in private:
                    private_told.append(n)

        play(table, created, people, random.Random(seed), steps=300, check=check)
        if private_told:
            break
    assert private_told, "no private ask reached in 10 matches"


def test_a_seat_whose_standing_auto_pass_answers_a_window_is_not_told_of_it() -> None:
    """NP-D7: a seat that set a standing auto-pass is asked in a card window on a clock that
    runs out at once (its pass goes in by itself): its player chose not to be asked, and was
    told "your turn" for every window it passed."""
    people = {0: ANN, 1: BOB, 2: CAT}
    standing_asks = []
    for seed in range(6):
        table = Table()
        created = table.create("nothing_personal", 3, seed=seed, people=people)
        match_id = created.match_id
        rng = random.Random(seed)
        for i in range(300):
            m = table.app.matches.get(match_id).match
            if m.finished:
                break
            pendings = m.engine.pending(m.state)
            seat = rng.choice(sorted({p.seat for p in pendings}))
            viewer = table.app.viewer(match_id, created.seat_tokens[seat])
            commands = table.app.legal_commands(match_id, viewer).commands
            autopass = [c for c in commands if c.WhichOneof("kind") == "set_auto_pass" and c.set_auto_pass.cards]
            table.app.submit(match_id, viewer, f"c{i}", autopass[0] if autopass else rng.choice(commands))
            notices = table.pump(match_id)
            m = table.app.matches.get(match_id).match
            standing = {p.seat for p in m.engine.pending(m.state) if 0 < p.timeout_seconds < 1}
            standing_asks += standing
            told = {n.seat for n in notices if n.kind == YOUR_TURN}
            assert not told & standing, f"told of an ask its auto-pass answers: {sorted(told & standing)}"
        if len(standing_asks) > 3:
            break
    assert standing_asks, "no window answered by a standing auto-pass in 6 matches"


def _player_of(table: Table, notice: StoredNotice) -> str:
    (player,) = [p for p in (ANN, BOB, CAT) if notice in table.notices.read(p)]
    return player


def test_a_seat_the_bots_play_is_not_told_and_one_left_for_good_is_not_told_the_end() -> None:
    table = Table()
    created = table.create("grifters", 3, seed=4, people={0: ANN, 1: BOB, 2: CAT})
    match_id = created.match_id
    for seat, reason in ((1, "timeouts"), (2, "left")):
        version = table.store.version(match_id)
        change = envelope_pb2.SeatLeft(seat=seat, policy="random", reason=reason)
        table.store.append(match_id, version, [seat_change_envelope(match_id, version, "grifters", change,
                                                                    command_id=f"seat:{version}")])
        table.pump(match_id)
    before = {p: len(table.notices.read(p)) for p in (BOB, CAT)}
    play(table, created, {0: ANN}, random.Random(4), steps=60)
    assert all(n.kind != YOUR_TURN for p in (BOB, CAT) for n in table.notices.read(p)[before[p]:])
    table.app.cancel_match(match_id, "ops", "stuck")
    table.pump(match_id)
    assert table.told(ANN)[-1][2] == table.told(BOB)[-1][2] == MATCH_OVER  # away by its clock: still its match
    assert all(k != MATCH_OVER for _m, _s, k, _v in table.told(CAT))


def test_an_away_seat_is_not_asked_in_the_fold() -> None:
    """The rule alone: the seats the bots play are out of the asks."""
    table = Table()
    created = table.create("grifters", 2, seed=1, people={0: ANN, 1: BOB})
    m = table.app.matches.get(created.match_id).match
    asked = {p.seat for p in m.engine.pending(m.state)}
    watch = watch_for(m)
    assert watch is not None
    m.away = {s: (envelope_pb2.SeatLeft(seat=s, reason="timeouts"), 2) for s in asked}
    look(m, watch)
    assert turn_notices(m, watch) == []


def test_a_cancelled_match_is_told_to_every_person_once() -> None:
    table = Table()
    created = table.create("grifters", 3, seed=2, people={0: ANN, 2: BOB}, bots=(1,))
    table.app.cancel_match(created.match_id, "ops", "stuck")
    table.pump(created.match_id)
    table.pump(created.match_id)
    for player, seat in ((ANN, 0), (BOB, 2)):
        assert [(s, k) for _m, s, k, _v in table.told(player) if k == MATCH_OVER] == [(seat, MATCH_OVER)]


# -- once, and at no cost --------------------------------------------------------------------------
def test_a_restarted_or_second_dispatcher_tells_nothing_again() -> None:
    """A dispatcher that folds the matches again (a restart: `recover`; another reading the
    streams in other batches) offers the same notices, and the store writes none twice."""
    table = Table()
    people = {0: ANN, 1: BOB}
    live = table.create("grifters", 2, seed=6, people=people)
    play(table, live, people, random.Random(6), steps=25)
    ended = table.create("grifters", 2, seed=7, people=people)
    play(table, ended, people, random.Random(7), steps=2000)
    written = {p: table.told(p) for p in (ANN, BOB)}
    assert written[ANN] and written[BOB]
    restarted = table.new_dispatcher()
    assert restarted.recover() >= 1
    whole = table.new_dispatcher()  # every event in one batch a match
    for match_id in (live.match_id, ended.match_id):
        whole.handle(table.store.read(match_id))
    assert {p: table.told(p) for p in (ANN, BOB)} == written
    assert restarted.matches[live.match_id].watch is not None


@pytest.mark.parametrize("game", ["grifters", "nothing_personal"])
def test_a_read_cut_in_the_middle_of_a_command_tells_nothing_another_dispatcher_tells_again(game: str) -> None:
    """A capped read may end inside a command. The asks standing once it is read whole are named
    as a fold of whole commands names them (by the command's first seq), so a restarted or a
    second dispatcher, reading the match in one batch, finds them told: none is told twice."""
    table = Table()
    people = {0: ANN, 1: BOB, 2: CAT}
    info = [envelope_pb2.SeatInfo(seat=s, player_id=p) for s, p in people.items()]
    match_id = table.app.create_match(game, 3, seed=5, seat_info=info).match_id
    rng = random.Random(5)
    for i in range(40):  # played before the dispatcher reads anything
        m = table.app.matches.get(match_id).match
        seat = rng.choice(sorted({p.seat for p in m.engine.pending(m.state)}))
        viewer = Viewer(seat)
        table.app.submit(match_id, viewer, f"c{i}", rng.choice(table.app.legal_commands(match_id, viewer).commands))
    envelopes = table.store.read(match_id)
    cut_inside = 0
    for i, envelope in enumerate(envelopes):
        table.dispatcher.handle([envelope])  # an event a read: every command of several events cut
        following = envelopes[i + 1] if i + 1 < len(envelopes) else None
        if following is not None and (following.seat, following.command_id) == (envelope.seat, envelope.command_id):
            cut_inside += 1
            continue
        told = {p: table.told(p) for p in people.values()}
        table.new_dispatcher().handle(envelopes[:i + 1])  # another one, reading it whole
        assert {p: table.told(p) for p in people.values()} == told, f"told again after event {envelope.seq}"
    assert cut_inside > 10 and any(table.told(p) for p in people.values())


def test_a_match_of_bots_only_costs_nothing_and_notifications_can_be_off() -> None:
    class Refusing(InMemoryTurnNotices):
        def tell(self, notices):
            raise AssertionError(f"told {notices}")

    table = Table(Refusing())
    created = table.create("grifters", 2, seed=1, people={}, bots=(0, 1))
    assert table.dispatcher.matches[created.match_id].watch is None
    off = Table()
    off.dispatcher = Dispatcher(off.store, off.registry, NoTasks())  # FAMIGLIA_TURN_NOTIFICATIONS=off
    named = off.create("grifters", 2, seed=1, people={0: ANN, 1: BOB})
    assert off.dispatcher.matches[named.match_id].watch is None and off.told(ANN) == []


def test_notices_the_store_was_away_for_are_written_later_and_the_match_goes_on() -> None:
    class Away(InMemoryTurnNotices):
        away = True

        def tell(self, notices):
            if self.away:
                raise ConnectionError("redis away")
            return super().tell(notices)

    notices = Away()
    table = Table(notices)
    created = table.create("grifters", 2, seed=2, people={0: ANN, 1: BOB})
    assert table.dispatcher.matches[created.match_id].watch is not None  # followed, though nothing written
    assert table.told(ANN) == table.told(BOB) == []
    notices.away = False
    table.dispatcher.check_stalls()
    m = table.app.matches.get(created.match_id).match
    asked = sorted({p.seat for p in m.engine.pending(m.state)})
    assert [s for p in (ANN, BOB) for _m, s, k, _v in table.told(p) if k == YOUR_TURN] == asked


def test_the_told_mark_keeps_a_later_ask_and_drops_an_earlier_or_the_same() -> None:
    notices = InMemoryTurnNotices()

    def ask(at: int, kind: str = YOUR_TURN) -> TurnNotice:
        return TurnNotice(ANN, "m1", "grifters", 0, kind, at, asked_at=at)

    assert notices.tell([ask(5)]) == 1
    assert notices.tell([ask(5), ask(3)]) == 0
    assert notices.tell([ask(8)]) == 1
    assert notices.tell([ask(9, MATCH_OVER)]) == 1
    assert notices.tell([ask(12), ask(12, MATCH_OVER)]) == 0
    assert [(n.kind, n.version) for n in notices.read(ANN)] == [(YOUR_TURN, 5), (YOUR_TURN, 8), (MATCH_OVER, 9)]


@pytest.mark.parametrize("maxlen", [3])
def test_a_players_stream_keeps_its_newest(maxlen: int) -> None:
    notices = InMemoryTurnNotices(maxlen=maxlen)
    for at in range(1, 6):
        notices.tell([TurnNotice(ANN, f"m{at}", "grifters", 0, YOUR_TURN, at, asked_at=at)])
    kept = notices.read(ANN)
    assert [n.match_id for n in kept] == ["m3", "m4", "m5"]
    assert notices.read(ANN, kept[0].id) == kept[1:]


def test_a_seat_still_asked_after_its_own_move_is_not_told_again() -> None:
    """GoodCritters Step 3 (GC-D03, GC-D04): a seat that chooses its card stays asked until it
    commits. One ask is told once: the seat's own moves inside it begin no new one (it was
    told "your turn" for every card it chose, and for every threat it moved)."""
    table = Table()
    people = {0: ANN, 1: BOB, 2: CAT}
    created = table.create("goodcritters", 4, seed=8, people=people, bots=(3,))
    match_id, rng = created.match_id, random.Random(8)
    own_moves = 0
    for i in range(400):
        m = table.app.matches.get(match_id).match
        if m.finished or own_moves >= 5:
            break
        seat = rng.choice(sorted({p.seat for p in m.engine.pending(m.state)}))
        viewer = Viewer(seat, bot=True) if seat == 3 else table.app.viewer(match_id, created.seat_tokens[seat])
        commands = table.app.legal_commands(match_id, viewer).commands
        staying = [c for c in commands if c.WhichOneof("kind") in ("choose_action_card", "place_threat")]
        table.app.submit(match_id, viewer, f"c{i}", rng.choice(staying or commands))
        notices = table.pump(match_id)
        if staying and seat != 3 and table.asked(match_id, seat):
            own_moves += 1
            assert seat not in {n.seat for n in notices if n.kind == YOUR_TURN}, f"seat {seat} told again"
    assert own_moves >= 5


def test_an_ask_or_an_end_older_than_its_told_mark_is_not_told_again() -> None:
    """A told mark lives TTL_SECONDS (7 days): a match idle longer, folded again by a restarted
    dispatcher, found no mark and told its person's week-old ask (and a match over as long, met
    again in the partition's recent entries, its end). What began more than STALE_SECONDS ago
    is not told: told already when it began, its mark since gone, or news to nobody."""
    table = Table()
    people = {0: ANN, 1: BOB}
    idle = table.create("grifters", 2, seed=6, people=people)
    play(table, idle, people, random.Random(6), steps=5)
    ended = table.create("grifters", 2, seed=7, people=people)
    table.app.cancel_match(ended.match_id, "ops", "stuck")
    table.pump(ended.match_id)
    assert {k for p in (ANN, BOB) for _m, _s, k, _v in table.told(p)} == {YOUR_TURN, MATCH_OVER}
    week_later = time.time() + TTL_SECONDS
    for match_id in (idle.match_id, ended.match_id):
        expired = InMemoryTurnNotices()  # every mark gone with its TTL
        later = Dispatcher(table.store, table.registry, NoTasks(), notices=expired, wall=lambda: week_later)
        later.handle(table.store.read(match_id))
        assert expired.read(ANN) == expired.read(BOB) == []
    soon = InMemoryTurnNotices()  # a mark lost within the week (a store gone back): told again, as before
    Dispatcher(table.store, table.registry, NoTasks(), notices=soon).handle(table.store.read(idle.match_id))
    assert soon.read(ANN) or soon.read(BOB)
