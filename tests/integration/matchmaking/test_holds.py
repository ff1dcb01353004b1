"""One table per player across games, on real Redis: players queued in two games at once,
matchers racing over both, and matchers that die at every step between holding a
player and seating them. The check is always the same: nobody holds two tables."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from famiglia.matchmaking import MatchPolicy, form_matches
from services.matchmaking.bootstrap import Matchmaking
from services.matchmaking.holds import Hold, HoldSeat, hold_key
from services.matchmaking.matcher import MatcherTuning
from tests.profile import examples

from .conftest import GAME, FakeClock, RecordingCreator, make_mm

DUEL = "duel"


class Crash(BaseException):
    """The matcher process dies here (BaseException: nothing in the matcher catches it)."""


def _crash_after(fn: Callable[..., Any]) -> Callable[..., Any]:
    def crashing(*args: Any, **kwargs: Any) -> Any:
        fn(*args, **kwargs)
        raise Crash

    return crashing


def _crash_before(fn: Callable[..., Any]) -> Callable[..., Any]:
    def crashing(*args: Any, **kwargs: Any) -> Any:
        raise Crash

    return crashing


def _matched(mm: Matchmaking, player: str, tickets: list[str]) -> list[str]:
    """The player's tickets that ended matched."""
    return [t for t in tickets if (r := mm.app.store.get(t)) is not None and r.state == "matched"]


def _drain(matchers: list[Matchmaking], games: list[str], timeout: float) -> None:
    stop = threading.Event()
    errors: list[BaseException] = []

    def loop(m: Matchmaking) -> None:
        try:
            while not stop.is_set():
                m.matcher.run_once()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=loop, args=(m,)) for m in matchers]
    for t in threads:
        t.start()
    store = matchers[0].app.store
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not errors:
            if all(store.queue_size(g) == 0 and not store.stale_claims(g, 2**62) for g in games):
                return
            time.sleep(0.02)
        raise AssertionError(f"not drained: {[store.queue_size(g) for g in games]} ({errors})")
    finally:
        stop.set()
        for t in threads:
            t.join()


@pytest.mark.parametrize("parties", [False, True])
def test_players_queued_in_two_games_with_racing_matchers_sit_at_one_table(redis_url: str, creator: RecordingCreator,
                                                                          parties: bool) -> None:
    policy = MatchPolicy(window_start=100.0, backfill_after=0.3, bot_policy="random")  # everyone overlaps
    matchers = [make_mm(redis_url, creator, policy=policy) for _ in range(4)]
    for m in matchers[::2]:  # half of them look at the other game first: the games race both ways
        m.matcher.games = dict(reversed(list(m.matcher.games.items())))
    for m in matchers:  # the soak's 1,500 players on a loaded machine outlast the 11-minute seated hold
        m.matcher.holds.seated_ms = 3_600_000
    app = matchers[0].app
    rng = random.Random(11)
    players = [app.register_guest(f"P{i}")[0].player_id for i in range(examples(160, 1500))]
    tickets: dict[str, list[str]] = {p: [] for p in players}
    for p in players:
        tickets[p].append(app.create_ticket(p, DUEL, [], {}).ticket_id)
    queue = list(players)
    rng.shuffle(queue)
    while queue:  # the parlour: alone, or (with parties) in parties of up to three that every member accepted
        size = min(len(queue), rng.choice([1, 2, 3]) if parties else 1)
        party, queue = queue[:size], queue[size:]
        ticket = app.create_ticket(party[0], GAME, [], {}, party=party[1:]).ticket_id
        for p in party:
            if p != party[0]:
                app.accept_invite(p, ticket)
            tickets[p].append(ticket)
    _drain(matchers, [GAME, DUEL], timeout=examples(30, 600))

    seated = Counter(creator.seated_players())
    assert [p for p, n in seated.items() if n > 1] == []
    for p in players:
        matched = _matched(matchers[0], p, tickets[p])
        assert len(matched) == 1, (p, matched)
        assert seated[p] == 1
        [other] = [t for t in tickets[p] if t not in matched]
        record = app.store.get(other)
        assert record is not None and record.state == "cancelled" and record.reason.startswith("matched in ")
        held = matchers[0].matcher.holds.get(p)
        assert held is not None and held.kind == "seated"  # nothing left leased or pinned
    for m in matchers:
        m.close()


def _two_games(mm: Matchmaking, clock: FakeClock | None = None) -> tuple[str, str, str, str]:
    """A in both games; B waits for A in the duel, C in the parlour (tables of two):
    (a, a's duel ticket, a's parlour ticket, c's parlour ticket)."""
    a, b, c = (mm.app.register_guest(n)[0].player_id for n in "ABC")
    duel = mm.app.create_ticket(a, DUEL, [], {}).ticket_id
    parlour = mm.app.create_ticket(a, GAME, [2], {}).ticket_id
    mm.app.create_ticket(b, DUEL, [], {})
    c_ticket = mm.app.create_ticket(c, GAME, [2], {}).ticket_id
    if clock is not None:
        clock.advance(0.001)
    return a, duel, parlour, c_ticket


def _parlour_first(mm: Matchmaking) -> None:
    mm.matcher.games = {GAME: mm.matcher.games[GAME], DUEL: mm.matcher.games[DUEL]}


def test_a_matcher_that_dies_holding_players_blocks_them_only_until_the_lease_ends(
        redis_url: str, creator: RecordingCreator) -> None:
    crashed = make_mm(redis_url, creator, tuning=MatcherTuning(hold_ms=60_000))
    a, duel, parlour, _ = _two_games(crashed)
    crashed.app.store.claim = _crash_before(crashed.app.store.claim)  # type: ignore[method-assign]
    with pytest.raises(Crash):
        crashed.matcher.tick(DUEL)  # held A and B, died before claiming

    other = make_mm(redis_url, creator)
    _parlour_first(other)
    assert other.matcher.tick(GAME) == 0  # A is promised to the dead matcher's duel table
    assert other.app.ticket(a, parlour).state == "searching" and not creator.tables
    assert 0 < other.app.store.client.pttl(hold_key(a)) <= 60_000

    other.app.store.client.pexpire(hold_key(a), 1)  # the lease runs out
    time.sleep(0.01)
    assert other.matcher.run_once() == 1  # A sits in the parlour with C ...
    assert other.app.ticket(a, parlour).state == "matched"
    assert other.app.ticket(a, duel).state == "cancelled"  # ... and leaves the duel queue
    assert Counter(creator.seated_players())[a] == 1
    other.close()


def test_a_claim_whose_matcher_died_before_pinning_the_holds_is_finished_by_another(
        redis_url: str, creator: RecordingCreator) -> None:
    clock = FakeClock()
    crashed = make_mm(redis_url, creator, clock=clock, tuning=MatcherTuning(claim_retry_ms=5000))
    a, duel, parlour, _ = _two_games(crashed, clock)
    crashed.matcher.holds.commit = _crash_before(crashed.matcher.holds.commit)  # type: ignore[method-assign]
    with pytest.raises(Crash):
        crashed.matcher.tick(DUEL)  # claimed, holds still leases

    other = make_mm(redis_url, creator, clock=clock, tuning=MatcherTuning(claim_retry_ms=5000))
    _parlour_first(other)
    assert other.matcher.run_once() == 0  # the parlour may not take A; the claim is too fresh to retry
    clock.advance(5)
    assert other.matcher.tick(DUEL) == 1  # the retry takes the dead matcher's holds over and finishes
    assert other.app.ticket(a, duel).state == "matched"
    assert other.app.ticket(a, parlour).state == "cancelled"
    assert other.matcher.run_once() == 0
    assert Counter(creator.seated_players())[a] == 1
    other.close()


def test_a_claim_whose_leases_ran_out_and_went_elsewhere_is_given_up(redis_url: str,
                                                                     creator: RecordingCreator) -> None:
    clock = FakeClock()
    crashed = make_mm(redis_url, creator, clock=clock, tuning=MatcherTuning(claim_retry_ms=5000))
    a, duel, parlour, _ = _two_games(crashed, clock)
    crashed.matcher.holds.commit = _crash_before(crashed.matcher.holds.commit)  # type: ignore[method-assign]
    with pytest.raises(Crash):
        crashed.matcher.tick(DUEL)
    client = crashed.app.store.client
    client.pexpire(hold_key(a), 1)  # the dead matcher's lease on A runs out ...
    time.sleep(0.01)

    other = make_mm(redis_url, creator, clock=clock, tuning=MatcherTuning(claim_retry_ms=5000))
    _parlour_first(other)
    assert other.matcher.tick(GAME) == 1  # ... so the parlour seats A (the duel ticket is claimed: not cancelled)
    assert other.app.ticket(a, parlour).state == "matched"
    clock.advance(5)
    assert other.matcher.tick(DUEL) == 0  # the retry cannot hold A again: the duel table is given up
    assert other.app.ticket(a, duel).state == "cancelled"  # and A's duel ticket, older than A's table, ends
    assert Counter(creator.seated_players())[a] == 1 and len(creator.tables) == 1
    other.close()


def test_a_matcher_that_dies_while_creating_the_match_keeps_its_players(redis_url: str,
                                                                        creator: RecordingCreator) -> None:
    clock = FakeClock()
    crashed = make_mm(redis_url, creator, clock=clock, tuning=MatcherTuning(claim_retry_ms=5000, hold_ms=200))
    a, duel, parlour, _ = _two_games(crashed, clock)
    crashed.matcher.creator = _Dying(creator)  # type: ignore[assignment]
    with pytest.raises(Crash):
        crashed.matcher.tick(DUEL)  # the match exists, nobody was told
    [ghost] = creator.tables
    time.sleep(0.3)  # longer than any lease: a pinned hold does not run out

    other = make_mm(redis_url, creator, clock=clock, tuning=MatcherTuning(claim_retry_ms=5000))
    _parlour_first(other)
    assert other.matcher.run_once() == 0
    assert other.app.ticket(a, parlour).state == "searching"
    held = other.matcher.holds.get(a)
    assert held is not None and held.kind == "table" and held.game_id == DUEL
    clock.advance(5)
    assert other.matcher.tick(DUEL) == 1  # the retry gets the same match
    status = other.app.ticket(a, duel)
    assert status.state == "matched" and status.match_id == ghost
    assert other.app.ticket(a, parlour).state == "cancelled"
    assert Counter(creator.seated_players())[a] == 1
    other.close()


class _Dying:
    def __init__(self, creator: RecordingCreator) -> None:
        self.creator = creator

    def create_match(self, *args: Any, **kwargs: Any) -> Any:
        self.creator.create_match(*args, **kwargs)
        raise Crash


def test_a_matcher_that_dies_after_finalizing_still_keeps_its_players_out_of_other_tables(
        redis_url: str, creator: RecordingCreator) -> None:
    clock = FakeClock()
    crashed = make_mm(redis_url, creator, clock=clock)
    a, duel, parlour, c_ticket = _two_games(crashed, clock)
    crashed.matcher._leave_other_queues = _crash_before(crashed.matcher._leave_other_queues)  # type: ignore[method-assign]
    with pytest.raises(Crash):
        crashed.matcher.tick(DUEL)  # matched in the duel; the parlour ticket is still searching
    assert crashed.app.ticket(a, duel).state == "matched"
    assert crashed.app.ticket(a, parlour).state == "searching"

    other = make_mm(redis_url, creator, clock=clock)
    assert other.matcher.tick(GAME) == 0  # A's duel table is done: A's older parlour ticket is stale
    status = other.app.ticket(a, parlour)
    assert status.state == "cancelled" and status.reason.startswith(f"matched in {DUEL}")
    held = other.matcher.holds.get(a)
    assert held is not None and held.kind == "seated"
    assert Counter(creator.seated_players())[a] == 1

    clock.advance(1)  # a ticket A makes after the match is a new wish: it may be matched
    again = other.app.create_ticket(a, GAME, [2], {}).ticket_id
    assert other.matcher.tick(GAME) == 1
    assert other.app.ticket(a, again).state == "matched"
    assert other.app.store.get(c_ticket).state == "matched"  # type: ignore[union-attr]
    other.close()


def test_a_lease_lost_between_holding_and_claiming_sends_the_table_back(redis_url: str,
                                                                        creator: RecordingCreator) -> None:
    """The slow matcher's lease on A ran out while it claimed; the duel seated A meanwhile. Its
    claim must not become a table, and A's parlour ticket (older than A's duel table) ends."""
    clock = FakeClock()
    slow = make_mm(redis_url, creator, clock=clock)
    fast = make_mm(redis_url, creator, clock=clock)
    a, duel, parlour, c_ticket = _two_games(slow, clock)
    claim = slow.app.store.claim

    def paused_claim(*args: Any, **kwargs: Any) -> bool:
        slow.app.store.client.delete(hold_key(a))  # the lease ran out during a long pause ...
        ok = claim(*args, **kwargs)
        assert fast.matcher.tick(DUEL) == 1  # ... and another matcher seated A in the duel
        return ok

    slow.app.store.claim = paused_claim  # type: ignore[method-assign]
    assert slow.matcher.tick(GAME) == 0
    assert slow.app.ticket(a, duel).state == "matched"
    assert slow.app.store.get(c_ticket).state == "searching"  # type: ignore[union-attr]  # C back in line
    slow.app.store.claim = claim  # type: ignore[method-assign]
    assert slow.matcher.tick(GAME) == 0
    status = slow.app.ticket(a, parlour)
    assert status.state == "cancelled" and status.reason.startswith(f"matched in {DUEL}")
    assert Counter(creator.seated_players())[a] == 1
    for m in (slow, fast):
        m.close()


def test_two_matchers_proposing_the_same_table_settle_it_once(redis_url: str, creator: RecordingCreator) -> None:
    clock = FakeClock()
    first, second = make_mm(redis_url, creator, clock=clock), make_mm(redis_url, creator, clock=clock)
    a, b = (first.app.register_guest(n)[0].player_id for n in "AB")
    first.app.create_ticket(a, DUEL, [], {})
    first.app.create_ticket(b, DUEL, [], {})
    [proposal] = form_matches([r.to_ticket() for r in first.app.store.queued(DUEL)], clock(), first.matcher.policy)
    people = [HoldSeat(p, t.ticket_id, t.created_ms) for t in proposal.tickets for p in t.players]
    mine = first.matcher.holds.take(DUEL, proposal.proposal_id, people)
    theirs = second.matcher.holds.take(DUEL, proposal.proposal_id, people)
    assert mine.ok and not theirs.ok  # one attempt per table at a time, even for the same proposal
    assert theirs.refused_by is not None and theirs.refused_by.kind == "lease"
    first.matcher.holds.free(DUEL, proposal.proposal_id, people, mine.lease)
    assert all(first.matcher.holds.get(p) is None for p in (a, b))
    assert second.matcher.run_once() == 1


def test_a_refused_table_frees_its_players_holds(redis_url: str, creator: RecordingCreator) -> None:
    mm = make_mm(redis_url, creator)
    a, b = (mm.app.register_guest(n)[0].player_id for n in "AB")
    mm.app.create_ticket(a, DUEL, [], {})
    mm.app.create_ticket(b, DUEL, [], {})
    creator.fail_next, creator.permanent = 1, True
    assert mm.matcher.run_once() == 0
    assert mm.matcher.holds.get(a) is None and mm.matcher.holds.get(b) is None
    mm.close()


def test_a_claim_retry_never_takes_a_hold_another_table_has(redis_url: str, creator: RecordingCreator) -> None:
    """hold_swap.lua's '-' accepts no hold at all, nothing else: a claim retry (`retake`) takes
    a player's hold only from its own table's lease or table hold, or from nobody, so a player
    another table holds is not seated at two."""
    mm = make_mm(redis_url, creator)
    holds, client = mm.matcher.holds, mm.app.store.client
    elsewhere = Hold("table", GAME, "p-elsewhere", f"{GAME}.t1").encode()
    client.set(hold_key("A"), elsewhere)
    assert not holds.retake(DUEL, "p-here", [HoldSeat("A", f"{DUEL}.t2")])
    assert client.get(hold_key("A")) == elsewhere
    assert holds.retake(DUEL, "p-here", [HoldSeat("B", f"{DUEL}.t2")])  # nobody held B
    assert holds.get("B") == Hold("table", DUEL, "p-here", f"{DUEL}.t2")
    mm.close()


def test_a_claim_retry_that_cannot_hold_every_player_gives_back_the_holds_it_took(
        redis_url: str, creator: RecordingCreator) -> None:
    """`retake` gave back the holds it had pinned with the value of the player it failed on: at a
    table of several tickets every other player's hold names another ticket, so theirs stayed
    pinned to a table that was then given up (a day's TTL, until some matcher settled it)."""
    mm = make_mm(redis_url, creator)
    holds, client = mm.matcher.holds, mm.app.store.client
    elsewhere = Hold("table", GAME, "p-elsewhere", f"{GAME}.t9").encode()
    client.set(hold_key("B"), elsewhere)
    assert not holds.retake(DUEL, "p-here", [HoldSeat("A", f"{DUEL}.t1"), HoldSeat("B", f"{DUEL}.t2")])
    assert holds.get("A") is None  # A was pinned first (players in order), then given back
    assert client.get(hold_key("B")) == elsewhere
    mm.close()


def test_hold_values_read_back() -> None:
    hold = Hold("seated", DUEL, "m-1", "1700000000000")
    assert Hold.parse(hold.encode()) == hold and hold.seated_ms == 1_700_000_000_000
    assert Hold.parse("junk") is None and Hold.parse("other|a|b|c") is None


def test_holds_survive_a_redis_that_forgot_its_scripts(redis_url: str, creator: RecordingCreator) -> None:
    mm = make_mm(redis_url, creator)
    a, b = (mm.app.register_guest(n)[0].player_id for n in "AB")
    mm.app.create_ticket(a, DUEL, [], {})
    mm.app.create_ticket(b, DUEL, [], {})
    mm.app.store.client.script_flush()  # a restarted Redis: EVALSHA answers NOSCRIPT
    assert mm.matcher.run_once() == 1
    held = mm.matcher.holds.get(a)
    assert held is not None and held.kind == "seated"
    mm.close()


def test_a_claim_lost_to_its_own_table_leaves_the_holds_the_claim_retry_pinned(
        redis_url: str, creator: RecordingCreator, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """A matcher whose claim fails gives back only its leases. It freed the table's `table` holds as
    well: when the table it lost to was its own (the same tickets: same proposal), claimed by a
    matcher whose leases ran out before it pinned them and which died, the claim retry took this
    matcher's leases (any attempt at that table's) and pinned them, and this matcher's cleanup then
    unpinned the players while their match was being asked for: free for another table meanwhile."""
    mm, other = make_mm(redis_url, creator, clock=clock), make_mm(redis_url, creator, clock=clock)
    a, b = (mm.app.register_guest(n)[0].player_id for n in "AB")
    mm.app.create_ticket(a, DUEL, [], {})
    mm.app.create_ticket(b, DUEL, [], {})
    live = {r.ticket_id: r for r in mm.app.store.queued(DUEL)}
    [proposal] = form_matches([r.to_ticket() for r in live.values()], clock(), mm.matcher.policy)
    plan = mm.matcher.plan_table(proposal, {})
    claim = mm.app.store.claim

    def claimed_meanwhile(*args: Any, **kwargs: Any) -> bool:
        # Between this matcher's take and its claim: the other claimed the same table and died, and
        # its claim retry pinned the holds (this matcher's leases) and is waiting for CreateMatch.
        assert other.app.store.claim(proposal, plan, clock())
        clock.advance(1)
        creator.fail_next = 1
        assert other.matcher.tick(DUEL) == 0 and creator.calls == 1
        return claim(*args, **kwargs)

    monkeypatch.setattr(mm.app.store, "claim", claimed_meanwhile)
    assert not mm.matcher._claim(proposal, plan, live, clock())
    for player in (a, b):
        held = mm.matcher.holds.get(player)
        assert held is not None and (held.kind, held.ref) == ("table", proposal.proposal_id)
    clock.advance(1)
    assert other.matcher.tick(DUEL) == 1  # the retry's answer seats them, at that one table
    assert sorted(creator.seated_players()) == sorted([a, b])
    mm.close()
    other.close()
