"""The matcher on real Redis: many players, several matchers at once, cancellations racing
claims, bot backfill, restarts and crashed matchers. The checks are about people: every
player sits at most once, only at tables their ticket accepts, with their party."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import pytest
import structlog

from famiglia.auth import TokenSigner
from famiglia.auth.request_ids import private_request_id
from famiglia.grpcutil.errors import FailedPrecondition
from famiglia.localstack.redis_server import RedisServer
from famiglia.matchmaking import FixedRatings, MatchPolicy, Rating, form_matches, pool_key
from services.matchmaking.bootstrap import Matchmaking
from services.matchmaking.matcher import MatcherTuning
from services.matchmaking.store import WAIT_TTL_MS, Keys
from tests.profile import examples

from .conftest import GAME, SECRET, SHAPES, FakeClock, RecordingCreator, make_mm

FAST = MatchPolicy(window_start=3.0, window_growth=40.0, backfill_after=0.6, bot_policy="random")


def _queue_players(mm: Matchmaking, rng: random.Random, n: int, ratings: FixedRatings,
                   game: str = GAME) -> dict[str, str]:
    """n players in tickets of 1-3 (parties) with varied ratings, seat counts and options;
    ticket id -> owner."""
    shape = SHAPES[game]
    tickets: dict[str, str] = {}
    made = 0
    while made < n:
        size = min(n - made, rng.choice([1, 1, 1, 1, 2, 3]))
        ids = []
        for _ in range(size):
            player, _ = mm.app.register_guest(f"P{made}")
            ratings.set(player.player_id, Rating(mu=rng.gauss(25, 8)))
            ids.append(player.player_id)
            made += 1
        counts = sorted(rng.sample(range(max(shape.min_players, size), shape.max_players + 1),
                                   k=rng.randint(1, shape.max_players + 1 - max(shape.min_players, size))))
        options = {"variant": rng.choice(["classic", "short"])} if shape.option_defaults else {}
        if options.get("variant") == "classic" and rng.random() < 0.5:
            options = {}  # the default, spelled out or not, is one pool
        created = mm.app.create_ticket(ids[0], game, counts, options, party=ids[1:])
        for invitee in ids[1:]:  # a party queues once every invitee has accepted
            mm.app.accept_invite(invitee, created.ticket_id)
        tickets[created.ticket_id] = ids[0]
    return tickets


def _drain(matchers: list[Matchmaking], game: str = GAME, timeout: float = 20) -> None:
    """Run every matcher in its own thread until the game's queue and claims are empty."""
    stop = threading.Event()

    def loop(m: Matchmaking) -> None:
        while not stop.is_set():
            m.matcher.run_once()

    threads = [threading.Thread(target=loop, args=(m,)) for m in matchers]
    for t in threads:
        t.start()
    store = matchers[0].app.store
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if store.queue_size(game) == 0 and not store.stale_claims(game, 2**62):
                return
            time.sleep(0.02)
        raise AssertionError(f"queue not drained: {store.queue_size(game)} tickets left")
    finally:
        stop.set()
        for t in threads:
            t.join()


def _check_tables(mm: Matchmaking, creator: RecordingCreator, tickets: dict[str, str]) -> None:
    """Every table valid for every ticket at it; every player seated exactly once, with their party."""
    signer = TokenSigner(SECRET)
    seated = Counter(creator.seated_players())
    assert all(n == 1 for n in seated.values()), [p for p, n in seated.items() if n > 1]
    for ticket_id in tickets:
        record = mm.app.store.get(ticket_id)
        assert record is not None and record.state == "matched", (ticket_id, record and record.state)
        table = creator.tables[record.match_id]
        assert table.seats == record.seats and table.seats in record.seat_counts
        defaults = SHAPES[record.game_id].option_defaults
        assert {**defaults, **table.options} == record.options  # only deviations go to CreateMatch
        assert all(defaults[k] != v for k, v in table.options.items())
        at_table = {i.player_id: i.seat for i in table.seat_info if not i.bot}
        for player in record.players:  # the party sits together, each with its own token
            status = mm.app.ticket(player, ticket_id)
            claim = signer.read_seat(status.seat_token)
            assert (claim.match_id, claim.seat, claim.player_id) == (record.match_id, at_table[player], player)
        assert len(table.seat_info) == table.seats
        assert sorted(i.seat for i in table.seat_info) == list(range(table.seats))
        for bot in (i for i in table.seat_info if i.bot):
            assert bot.policy == mm.matcher.policy.bot_policy and bot.player_id.startswith("bot:")
    assert sum(seated.values()) == sum(len(mm.app.store.get(t).players) for t in tickets)  # type: ignore[union-attr]


def test_hundreds_of_players_all_end_up_in_valid_matches(redis_url: str, creator: RecordingCreator) -> None:
    ratings = FixedRatings()
    mm = make_mm(redis_url, creator, policy=FAST, ratings=ratings)
    n = examples(400, 5000)
    tickets = _queue_players(mm, random.Random(8), n, ratings)
    _drain([mm], timeout=examples(20, 600))
    _check_tables(mm, creator, tickets)
    humans = sum(1 for t in creator.tables.values() for i in t.seat_info if not i.bot)
    bots = sum(1 for t in creator.tables.values() for i in t.seat_info if i.bot)
    assert humans == n and bots < humans / 4  # backfill is the exception, not the rule
    mm.close()


def test_concurrent_matchers_never_double_book(redis_url: str, creator: RecordingCreator) -> None:
    ratings = FixedRatings()
    policy = MatchPolicy(window_start=100.0, backfill_after=0.5, bot_policy="random")  # everyone overlaps
    matchers = [make_mm(redis_url, creator, policy=policy, ratings=ratings) for _ in range(4)]
    tickets = _queue_players(matchers[0], random.Random(3), examples(300, 3000), ratings)
    _drain(matchers, timeout=examples(20, 600))
    _check_tables(matchers[0], creator, tickets)
    for m in matchers:
        m.close()


def test_cancellations_racing_the_matchers_are_safe(redis_url: str, creator: RecordingCreator) -> None:
    ratings = FixedRatings()
    policy = MatchPolicy(window_start=100.0, backfill_after=None)
    matchers = [make_mm(redis_url, creator, policy=policy, ratings=ratings) for _ in range(3)]
    app = matchers[0].app
    players = [app.register_guest(f"P{i}")[0].player_id for i in range(200)]
    rng = random.Random(5)
    stop = threading.Event()
    threads = [threading.Thread(target=lambda m=m: [m.matcher.run_once() for _ in iter(stop.is_set, True)])
               for m in matchers]
    for t in threads:
        t.start()
    outcome: dict[str, str] = {}
    try:
        for p in players:
            ticket = app.create_ticket(p, "duel", [], {}).ticket_id
            if rng.random() < 0.5:
                time.sleep(rng.random() * 0.002)
                try:
                    app.cancel(p, ticket)
                    outcome[ticket] = "cancelled"
                except FailedPrecondition as exc:
                    assert exc.code == "ticket_matched"
                    outcome[ticket] = "matched"
            else:
                outcome[ticket] = "any"
        time.sleep(0.3)
    finally:
        stop.set()
        for t in threads:
            t.join()
    seated = Counter(creator.seated_players())
    assert all(n == 1 for n in seated.values())
    for ticket, expected in outcome.items():
        record = app.store.get(ticket)
        assert record is not None
        player = record.players[0]
        if expected != "any":
            assert record.state == expected
        assert (record.state == "matched") == (player in seated), (ticket, record.state)
        assert record.state in ("matched", "cancelled", "searching")
    for m in matchers:
        m.close()


def test_bots_fill_the_table_after_the_timeout(redis_url: str, creator: RecordingCreator) -> None:
    clock = FakeClock()
    mm = make_mm(redis_url, creator, policy=MatchPolicy(backfill_after=30, bot_policy="random"), clock=clock)
    p = mm.app.register_guest("Alone")[0].player_id
    ticket = mm.app.create_ticket(p, GAME, [3, 4], {}).ticket_id
    clock.advance(29.9)
    assert mm.matcher.run_once() == 0
    assert mm.app.ticket(p, ticket).state == "searching"
    clock.advance(0.1)
    assert mm.matcher.run_once() == 1
    status = mm.app.ticket(p, ticket)
    assert (status.state, status.seats, status.bots) == ("matched", 3, 2)  # the fewest bots
    assert status.waited_s == 30.0
    table = creator.tables[status.match_id]
    assert [(i.bot, i.policy) for i in table.seat_info if i.player_id != p] == [(True, "random")] * 2
    # each bot its own player, so a person's result against them rates seat by seat
    assert sorted(i.player_id for i in table.seat_info if i.bot) == ["bot:random#1", "bot:random#2"]
    assert [i.display_name for i in table.seat_info if i.player_id == p] == ["Alone"]
    mm.close()


def test_no_bots_before_the_timeout_even_for_a_lonely_player(mm: Matchmaking, creator: RecordingCreator) -> None:
    p = mm.app.register_guest("Alone")[0].player_id
    mm.app.create_ticket(p, GAME, [], {})
    for _ in range(5):
        assert mm.matcher.run_once() == 0
    assert not creator.tables


def test_a_restarted_matcher_keeps_the_queued_tickets(redis_url: str, creator: RecordingCreator) -> None:
    first = make_mm(redis_url, creator)
    players = [first.app.register_guest(f"P{i}")[0].player_id for i in range(4)]
    tickets = {first.app.create_ticket(p, "duel", [], {}).ticket_id: p for p in players}
    first.close()  # the process goes away before matching anything

    second = make_mm(redis_url, creator)
    assert second.app.store.queue_size("duel") == 4
    assert second.matcher.run_once() == 2
    for ticket, player in tickets.items():
        assert second.app.ticket(player, ticket).state == "matched"
    second.close()


def test_a_matcher_waits_longer_while_redis_is_away_with_one_line_a_pass(tmp_path, creator: RecordingCreator) -> None:
    """With Redis down, the loop logged an error with its traceback for every game every tick
    (15 MB in five minutes of the embedded stack's log) and asked Redis again every 0.25 s. A
    pass that finds Redis away ends at that game with one warning, and the pause doubles up to
    its bound; the first pass that finds Redis back ticks every game and the pause is the
    tick's again. (The loop's `stop` records the pauses: nothing here waits.)"""
    server = RedisServer(data_dir=tmp_path / "redis").start()
    service = make_mm(server.url, creator, tuning=MatcherTuning(interval_s=0.25, away_pause_max_s=2.0))
    pauses: list[float | None] = []

    class Passes(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            pauses.append(timeout)
            if len(pauses) == 5:
                server.start()  # the same port
            if len(pauses) == 7:
                self.set()
            return self.is_set()

    server.stop()
    try:
        with structlog.testing.capture_logs() as captured:
            service.matcher.run(Passes())
    finally:
        service.close()
        server.stop()
    assert pauses == [0.5, 1.0, 2.0, 2.0, 2.0, 0.25, 0.25]
    away = [line for line in captured if line["event"] == "matcher_store_unavailable"]
    assert [line["passes"] for line in away] == [1, 2, 3, 4, 5]
    assert all(line["log_level"] == "warning" and "exc_info" not in line and line["error"] for line in away), away
    assert not [line for line in captured if line["event"] == "matcher_tick_failed"]


def test_a_crashed_matchers_claim_is_finished_by_another(redis_url: str, creator: RecordingCreator) -> None:
    clock = FakeClock()
    crashed = make_mm(redis_url, creator, clock=clock)
    a, b = (crashed.app.register_guest(n)[0].player_id for n in "AB")
    ta = crashed.app.create_ticket(a, "duel", [], {}).ticket_id
    crashed.app.create_ticket(b, "duel", [], {})
    records = crashed.app.store.queued("duel")
    [proposal] = form_matches([r.to_ticket() for r in records], clock(), crashed.matcher.policy)
    # its retry due 5 s later, as a matcher on a 5 s claim retry writes it
    assert crashed.app.store.claim(proposal, crashed.matcher.plan_table(proposal, {}), clock(), due_ms=clock() + 5000)
    crashed.close()  # claimed, never created

    other = make_mm(redis_url, creator, tuning=MatcherTuning(claim_retry_ms=5000), clock=clock)
    clock.advance(4.9)
    assert other.matcher.run_once() == 0  # too fresh to be presumed dead
    assert other.app.ticket(a, ta).state == "searching"  # claimed tickets still read as searching
    clock.advance(0.1)
    assert other.matcher.run_once() == 1
    status = other.app.ticket(a, ta)
    # The same table's request id: the other matcher keys it with the deployment's secret too.
    request_id = private_request_id(SECRET, f"mm:{proposal.proposal_id}")
    assert status.state == "matched" and status.match_id == f"m-{request_id}"
    other.close()


def test_an_unreachable_command_service_keeps_the_table_until_it_answers(redis_url: str,
                                                                     creator: RecordingCreator) -> None:
    mm = make_mm(redis_url, creator, tuning=MatcherTuning(claim_retry_ms=0, max_attempts=3))
    a, b = (mm.app.register_guest(n)[0].player_id for n in "AB")
    ta = mm.app.create_ticket(a, "duel", [], {}).ticket_id
    mm.app.create_ticket(b, "duel", [], {})
    creator.fail_next = 10**6
    for _ in range(10):  # the claim is retried (same table, same request id) until an answer comes
        mm.matcher.run_once()
    assert creator.calls >= 10
    assert mm.app.ticket(a, ta).state == "searching"  # never lost, never failed
    creator.fail_next = 0  # the command service is back
    mm.matcher.run_once()
    mm.matcher.run_once()
    assert mm.app.ticket(a, ta).state == "matched"
    assert len(creator.tables) == 1
    mm.close()


def test_a_creation_that_keeps_failing_unexpectedly_counts_its_attempts_too(redis_url: str,
                                                                          creator: RecordingCreator,
                                                                          monkeypatch) -> None:
    """A CreateMatch failing in a way that is no CreateFailed (a bug, a broken channel) failed
    the whole tick: it now counts as an attempt like any failure without an answer. The table is
    kept and retried with its own request id (the call may have made the match), never given
    back to the queue to become another table."""
    mm = make_mm(redis_url, creator, tuning=MatcherTuning(claim_retry_ms=0, max_attempts=3))
    a, b = (mm.app.register_guest(n)[0].player_id for n in "AB")
    ta = mm.app.create_ticket(a, "duel", [], {}).ticket_id
    mm.app.create_ticket(b, "duel", [], {})
    broken, tried = {"left": 10**6}, Counter()

    def create_match(*args, **kwargs):
        tried[kwargs["request_id"]] += 1
        if broken["left"]:
            broken["left"] -= 1
            raise RuntimeError("the channel broke in a way nobody foresaw")
        return RecordingCreator.create_match(creator, *args, **kwargs)

    monkeypatch.setattr(creator, "create_match", create_match)
    released = []
    release = mm.app.store.release
    monkeypatch.setattr(mm.app.store, "release", lambda *a, **k: (released.append(k), release(*a, **k))[1])
    for _ in range(6):
        mm.matcher.run_once()  # never raises: each failure is one attempt
    assert released == [] and list(tried.values()) == [6]  # one table, one request id, never given up
    assert mm.app.ticket(a, ta).state == "searching"  # (claimed reads as searching)
    broken["left"] = 0
    mm.matcher.run_once()
    assert mm.app.ticket(a, ta).state == "matched" and len(tried) == 1
    mm.close()


def test_a_refused_table_fails_its_tickets_and_frees_the_players(redis_url: str,
                                                                 creator: RecordingCreator) -> None:
    mm = make_mm(redis_url, creator)
    a, b = (mm.app.register_guest(n)[0].player_id for n in "AB")
    ta = mm.app.create_ticket(a, "duel", [], {}).ticket_id
    mm.app.create_ticket(b, "duel", [], {})
    creator.fail_next, creator.permanent = 1, True
    assert mm.matcher.run_once() == 0
    status = mm.app.ticket(a, ta)
    assert status.state == "failed" and "UNAVAILABLE" in status.reason
    mm.app.create_ticket(a, "duel", [], {})  # free to queue again
    mm.close()


def test_watching_a_ticket_sees_searching_then_matched(mm: Matchmaking, creator: RecordingCreator) -> None:
    a, b = (mm.app.register_guest(n)[0].player_id for n in "AB")
    ta = mm.app.create_ticket(a, "duel", [], {}).ticket_id
    seen: list[str] = []

    def watch() -> None:
        for status in mm.app.watch(a, ta, poll_s=0.01):
            seen.append(status.state)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    deadline = time.monotonic() + 30  # the watcher's first status, before anyone can be matched
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    mm.app.create_ticket(b, "duel", [], {})
    assert mm.matcher.run_once() == 1
    watcher.join(timeout=30)
    assert not watcher.is_alive(), f"the watch did not end on the match: {seen}"
    assert seen[0] == "searching" and seen[-1] == "matched"
    assert mm.app.ticket(a, ta).estimated_wait_s == 0.0


def test_estimates_follow_the_pools_recent_waits(mm: Matchmaking) -> None:
    assert mm.app.store.recent_wait("duel", pool_key("duel", {})) is None
    a, b, c = (mm.app.register_guest(n)[0].player_id for n in "ABC")
    mm.app.create_ticket(a, "duel", [], {})
    mm.app.create_ticket(b, "duel", [], {})
    mm.matcher.run_once()
    recent = mm.app.store.recent_wait("duel", pool_key("duel", {}))
    assert recent is not None and recent < 5
    tc = mm.app.create_ticket(c, "duel", [], {})
    assert tc.status.estimated_wait_s <= recent


@pytest.mark.parametrize("seed", [1, 2])
def test_party_members_are_never_split(redis_url: str, creator: RecordingCreator, seed: int) -> None:
    ratings = FixedRatings()
    mm = make_mm(redis_url, creator, policy=FAST, ratings=ratings)
    tickets = _queue_players(mm, random.Random(seed), 60, ratings)
    _drain([mm])
    parties = 0
    for ticket_id in tickets:
        record = mm.app.store.get(ticket_id)
        assert record is not None and record.state == "matched", ticket_id
        # every member sits at the ticket's table, at the seat the ticket names for them
        at_table = {i.player_id: i.seat for i in creator.tables[record.match_id].seat_info if not i.bot}
        assert {p: at_table.get(p) for p in record.players} == record.seat_of, (ticket_id, at_table)
        parties += len(record.players) > 1
    assert parties, "no party of two or more was queued: nothing here could be split"
    mm.close()


def test_a_match_in_one_game_takes_the_player_out_of_the_others(mm: Matchmaking) -> None:
    a, b = (mm.app.register_guest(n)[0].player_id for n in "AB")
    elsewhere = mm.app.create_ticket(a, GAME, [], {}).ticket_id
    mm.app.create_ticket(a, "duel", [], {})
    mm.app.create_ticket(b, "duel", [], {})
    assert mm.matcher.run_once() == 1
    status = mm.app.ticket(a, elsewhere)
    assert status.state == "cancelled" and status.reason.startswith("matched in duel")
    assert mm.app.store.queue_size(GAME) == 0


def test_the_waits_of_pools_no_table_uses_any_more_expire(redis_url: str, creator: RecordingCreator) -> None:
    """Each pool's average wait was a field of one `{mm:G}:stats` hash without a TTL; options with
    no list of choices (timeouts, counts) make a pool per value, so the hash grew by one field for
    each value a table was ever made with, for good. Each pool's wait now lives a week after its
    pool's last table; nothing a table leaves in the game's slot is kept for good."""
    mm = make_mm(redis_url, creator)
    client = mm.app.store.client
    for variant in ("classic", "short"):
        a, b = (mm.app.register_guest(n)[0].player_id for n in "AB")
        mm.app.create_ticket(a, GAME, [2], {"variant": variant})
        mm.app.create_ticket(b, GAME, [2], {"variant": variant})
        assert mm.matcher.run_once() == 1
        assert mm.app.store.recent_wait(GAME, pool_key(GAME, {"variant": variant})) is not None
    kept = {k: client.pttl(k) for k in client.scan_iter(Keys(GAME).tag + ":*")}
    assert kept and all(ttl > 0 for ttl in kept.values()), f"kept for good: {[k for k, t in kept.items() if t < 0]}"
    waits = [t for k, t in kept.items() if ":wait:" in k]
    assert len(waits) == 2 and all(WAIT_TTL_MS - 60_000 < t <= WAIT_TTL_MS for t in waits)
    mm.close()
