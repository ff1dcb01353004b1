"""GameService end to end: an outside client that knows only server reflection plays whole
matches over real gRPC against a real redis-server, and every refusal has its code."""

from __future__ import annotations

import random
import uuid

import grpc
import pytest
import redis

from famiglia.engine.registry import default_registry
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.grpcutil.errors import error_code
from famiglia.matchstate import MatchState

from .reflection_client import ReflectionClient

GS = "famiglia.v1.GameService"
REGISTRY = default_registry()
GAMES = list(REGISTRY)
pytestmark = pytest.mark.skipif(not GAMES, reason="no game engine registered yet")


def _fold(redis_url: str, match_id: str) -> MatchState:
    """The match as the store holds it: its stream, then its staged events (NP-H9)."""
    store = RedisEventStore.connect(redis_url)
    try:
        match = MatchState.from_envelopes(REGISTRY, store.read(match_id))
        match.apply(store.read_staged(match_id, after=match.version), staged=True)
        return match
    finally:
        store.close()


def _play_to_the_end(client: ReflectionClient, match_id: str, tokens: list[str], rng: random.Random,
                     redis_url: str, check_every: int = 15) -> object:
    engine_checks = 0
    n = 0
    drawn_checked = False
    while True:
        spectator = client.call(GS, "GetView", match_id=match_id)
        if spectator.finished:
            return spectator
        asked = sorted({p.seat for p in spectator.to_act})
        if not asked:  # privately asked seats only learn it from their own view
            asked = [s for s, t in enumerate(tokens)
                     if any(p.seat == s for p in client.call(GS, "GetView", t, match_id=match_id).to_act)]
        seat = rng.choice(asked)
        # every other command drawn from the whole of a compound choice (`sample_seed`)
        seed = rng.getrandbits(32) | 1 if n % 2 else 0
        legal = client.call(GS, "ListLegalCommands", tokens[seat], match_id=match_id, limit=32, sample_seed=seed)
        if seed and not legal.complete and not drawn_checked:  # once a match: the seed is the request's
            drawn_checked = True
            again = client.call(GS, "ListLegalCommands", tokens[seat], match_id=match_id, limit=32, sample_seed=seed)
            assert list(again.commands) == list(legal.commands), "the same seed draws the same"
            fixed = list(client.call(GS, "ListLegalCommands", tokens[seat], match_id=match_id, limit=32).commands)
            assert any(list(client.call(GS, "ListLegalCommands", tokens[seat], match_id=match_id, limit=32,
                                        sample_seed=other).commands) != fixed for other in range(1, 9))
        command = rng.choice(list(legal.commands))
        reply = client.call(GS, "SubmitCommand", tokens[seat], match_id=match_id, command_id=uuid.uuid4().hex,
                            expected_version=legal.version, command=command)
        # a held answer (NP-H9) moves no version: the table learns of it with the next event
        assert reply.version > legal.version or (reply.held and reply.version == legal.version)
        n += 1
        if n % check_every == 0:
            engine_checks += 1
            _check_views_are_the_engines(client, match_id, tokens, redis_url)


def _check_views_are_the_engines(client: ReflectionClient, match_id: str, tokens: list[str], redis_url: str) -> None:
    """Each token gets exactly its own seat's view; no token gets the spectator's."""
    match = _fold(redis_url, match_id)
    for seat, token in [(None, None), *enumerate(tokens)]:
        reply = client.call(GS, "GetView", token, match_id=match_id)
        if reply.version != match.public_version:
            continue
        got = client.unpack(reply.view).SerializeToString(deterministic=True)
        want = match.engine.view(match.state, seat).SerializeToString(deterministic=True)
        assert got == want, f"seat {seat} got a view that is not its own"


@pytest.mark.parametrize("game_id", GAMES)
def test_an_outside_client_plays_a_whole_match_using_only_reflection(command_address: str, redis_url: str,
                                                                      game_id: str) -> None:
    client = ReflectionClient(command_address)
    try:
        assert GS in client.services()
        assert "grpc.health.v1.Health" in client.services()
        games = {g.game_id: g for g in client.call(GS, "ListGames").games}
        assert game_id in games
        info = games[game_id]
        seats = info.max_players
        created = client.call(GS, "CreateMatch", game_id=game_id, seats=seats, seed=5)
        assert len(created.seat_tokens) == seats
        final = _play_to_the_end(client, created.match_id, list(created.seat_tokens), random.Random(5), redis_url)
        assert final.finished
        assert sorted(s.seat for s in final.result.seats) == list(range(seats))
        assert min(s.rank for s in final.result.seats) == 1
        # every seat's stream is exactly the engine's redaction of the stored events
        match = _fold(redis_url, created.match_id)
        store = RedisEventStore.connect(redis_url)
        envelopes = [e for e in store.read(created.match_id) if e.type != "match_created"]
        store.close()
        for seat, token in [(None, None), (0, created.seat_tokens[0]), (seats - 1, created.seat_tokens[-1])]:
            streamed = list(client.stream(GS, "StreamEvents", token, match_id=created.match_id, from_version=0,
                                          until_now=True))
            events = [r.event for r in streamed if r.HasField("event")]
            want = []
            for env in envelopes:
                shown = match.engine.redact(match.engine.info.event_type.FromString(env.payload), seat)
                if shown is not None:
                    want.append((env.seq, shown.SerializeToString(deterministic=True)))
            got = [(e.seq, client.unpack(e.event).SerializeToString(deterministic=True)) for e in events]
            assert got == want, f"stream of seat {seat} is not the engine's redaction"
            assert streamed[-1].finished
    finally:
        client.close()


def test_refusals_have_their_status_and_code_and_change_nothing(command_address: str, redis_url: str) -> None:
    client = ReflectionClient(command_address)
    game_id = GAMES[0]
    engine = REGISTRY.get(game_id)
    seats = engine.info.min_players
    created = client.call(GS, "CreateMatch", game_id=game_id, seats=seats, seed=8)
    mid, tokens = created.match_id, list(created.seat_tokens)
    r = redis.Redis.from_url(redis_url)
    store = RedisEventStore.connect(redis_url)
    version0 = store.version(mid)

    def code_of(call) -> tuple[grpc.StatusCode, str]:
        with pytest.raises(grpc.RpcError) as exc:
            call()
        return exc.value.code(), error_code(exc.value)

    match = _fold(redis_url, mid)
    pending = sorted({p.seat for p in engine.pending(match.state)})
    seat = pending[0]
    legal = client.call(GS, "ListLegalCommands", tokens[seat], match_id=mid)
    command = legal.commands[0]
    # no token / bad token / forged token
    assert code_of(lambda: client.call(GS, "SubmitCommand", None, match_id=mid, command_id="x", command=command))[0] \
        == grpc.StatusCode.UNAUTHENTICATED
    assert code_of(lambda: client.call(GS, "SubmitCommand", "garbage", match_id=mid, command_id="x",
                                       command=command))[0] == grpc.StatusCode.UNAUTHENTICATED
    forged = tokens[seat].split(".")[0] + "." + "A" * 43
    assert code_of(lambda: client.call(GS, "SubmitCommand", forged, match_id=mid, command_id="x",
                                       command=command))[0] == grpc.StatusCode.UNAUTHENTICATED
    # a token of another match acts for nobody here
    other = client.call(GS, "CreateMatch", game_id=game_id, seats=seats, seed=9)
    assert code_of(lambda: client.call(GS, "SubmitCommand", other.seat_tokens[seat], match_id=mid, command_id="x",
                                       command=command))[0] == grpc.StatusCode.PERMISSION_DENIED
    # unknown match; one with a very long id still gets its status and code, not a header overflow
    assert code_of(lambda: client.call(GS, "GetView", match_id="m-none"))[0] == grpc.StatusCode.NOT_FOUND
    assert code_of(lambda: client.call(GS, "GetView", match_id="m" * 20_000)) == \
        (grpc.StatusCode.NOT_FOUND, "unknown_match")
    # malformed: wrong type, garbage bytes, no command
    bad = type(command)(type_url="type.googleapis.com/famiglia.v1.EchoRequest", value=b"")
    assert code_of(lambda: client.call(GS, "SubmitCommand", tokens[seat], match_id=mid, command_id="x",
                                       command=bad)) == (grpc.StatusCode.INVALID_ARGUMENT, "wrong_command_type")
    garbage = type(command)(type_url=command.type_url, value=b"\xff\xff\xff\xff")
    assert code_of(lambda: client.call(GS, "SubmitCommand", tokens[seat], match_id=mid, command_id="x",
                                       command=garbage))[0] == grpc.StatusCode.INVALID_ARGUMENT
    assert code_of(lambda: client.call(GS, "SubmitCommand", tokens[seat], match_id=mid,
                                       command_id="x"))[0] == grpc.StatusCode.INVALID_ARGUMENT
    # stale expected version
    assert code_of(lambda: client.call(GS, "SubmitCommand", tokens[seat], match_id=mid, command_id="x",
                                       expected_version=version0 - 1, command=command)) == \
        (grpc.StatusCode.ABORTED, "stale_version")
    # out of turn: a seat that is not pending, with the rule id of the game
    idle = [s for s in range(seats) if s not in pending]
    if idle:
        status, code = code_of(lambda: client.call(GS, "SubmitCommand", tokens[idle[0]], match_id=mid,
                                                   command_id="x", command=command))
        assert status == grpc.StatusCode.FAILED_PRECONDITION
        assert code[:3] in ("GC-", "NP-", "NC-", "GR-")
    assert store.version(mid) == version0, "no refusal wrote anything"
    # the same command id twice: one append
    first = client.call(GS, "SubmitCommand", tokens[seat], match_id=mid, command_id="once", command=command)
    second = client.call(GS, "SubmitCommand", tokens[seat], match_id=mid, command_id="once", command=command)
    assert second.duplicate and second.version == first.version == store.version(mid)
    # ... and the same id for another command is refused, not answered with the first one's result
    assert code_of(lambda: client.call(GS, "SubmitCommand", tokens[seat], match_id=mid, command_id="once",
                                       command=bad)) == (grpc.StatusCode.INVALID_ARGUMENT, "wrong_command_type")
    other_command = next((c for c in client.call(GS, "ListLegalCommands", tokens[seat], match_id=mid).commands
                          if c.value != command.value), None)
    if other_command is not None:
        assert code_of(lambda: client.call(GS, "SubmitCommand", tokens[seat], match_id=mid, command_id="once",
                                           command=other_command)) == (grpc.StatusCode.ABORTED, "command_id_reused")
    assert store.version(mid) == first.version
    assert r.ping()
    store.close()
    client.close()


def test_killing_the_command_service_mid_match_loses_nothing(command_process, redis_url: str) -> None:
    game_id = GAMES[0]
    client = ReflectionClient(command_process.address)
    created = client.call(GS, "CreateMatch", game_id=game_id, seats=REGISTRY.get(game_id).info.min_players, seed=13)
    mid, tokens = created.match_id, list(created.seat_tokens)
    rng = random.Random(13)
    acknowledged = 0
    for _ in range(12):
        view = client.call(GS, "GetView", match_id=mid)
        if view.finished:
            break
        seat = rng.choice(sorted({p.seat for p in view.to_act}))
        legal = client.call(GS, "ListLegalCommands", tokens[seat], match_id=mid)
        acknowledged = client.call(GS, "SubmitCommand", tokens[seat], match_id=mid, command_id=uuid.uuid4().hex,
                                   command=rng.choice(list(legal.commands))).version
    client.close()
    command_process.kill()
    command_process.start()
    client = ReflectionClient(command_process.address)
    try:
        assert client.call(GS, "GetView", match_id=mid).version == acknowledged
        final = _play_to_the_end(client, mid, tokens, rng, redis_url, check_every=10**9)
        assert final.finished
    finally:
        client.close()


def test_every_refusal_leaves_a_line_naming_its_match_and_code(command_address: str) -> None:
    """A refusal is a status for the client and a log line for the operator: the rpc, the
    status, the code and the request's ids (a stale version, a forged token alike)."""
    import structlog

    from famiglia.client import GameClient

    from .conftest import match_and_first_move

    client = GameClient(command_address)
    match, me, command = match_and_first_move(client, seed=6)
    with structlog.testing.capture_logs() as captured:
        with pytest.raises(grpc.RpcError):
            me.submit(command, command_id="stale-1", expected_version=match.version + 7)
        with pytest.raises(grpc.RpcError):
            client.seat(match.match_id, "forged").view()
    refused = [line for line in captured if line["event"] == "rpc_refused"]
    assert [(r["rpc"], r["code"], r["match_id"]) for r in refused] == [
        ("SubmitCommand", "stale_version", match.match_id), ("GetView", "bad_token", match.match_id)]
    assert refused[0]["command_id"] == "stale-1" and refused[0]["status"] == "ABORTED"
    # a rule's refusal is one line, the command service's, which names the seat too
    asked = {p.seat for p in client.spectator(match.match_id).view().to_act}
    idle = next(s for s in range(len(match.seat_tokens)) if s not in asked)
    with structlog.testing.capture_logs() as captured:
        with pytest.raises(grpc.RpcError) as rule:
            client.seat(match.match_id, match.seat_tokens[idle]).submit(command, command_id="idle-1")
    assert rule.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    lines = [line for line in captured if line["event"] in ("rpc_refused", "command_refused")]
    assert [(r["event"], r["match_id"], r["seat"], r["command_id"]) for r in lines] == [
        ("command_refused", match.match_id, idle, "idle-1")]
    client.close()


def test_a_refused_entry_of_submit_commands_leaves_a_line_too(command_address: str) -> None:
    """SubmitCommands answers a refused entry in its reply, not as a status: the operator still
    gets the refusal's one line, naming the entry's command id and index (a rule's refusal is
    the command service's `command_refused`, not a second line)."""
    import structlog

    from famiglia.client import GameClient

    from .conftest import match_and_first_move

    client = GameClient(command_address)
    match, me, command = match_and_first_move(client, seed=8)
    asked = {p.seat for p in client.spectator(match.match_id).view().to_act}
    idle = next(s for s in range(len(match.seat_tokens)) if s not in asked)
    with structlog.testing.capture_logs() as captured:
        rule = client.submit_commands(match.match_id, [(match.seat_tokens[idle], command, "chain-idle-1")])
    assert rule.refusal.status == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    lines = [line for line in captured if line["event"] in ("rpc_refused", "command_refused")]
    assert [(r["event"], r["seat"], r["command_id"]) for r in lines] == [("command_refused", idle, "chain-idle-1")]
    with structlog.testing.capture_logs() as captured:
        stale = client.submit_commands(match.match_id, [(me.token, command, "chain-stale-1")],
                                       expected_version=match.version + 7)
        forged = client.submit_commands(match.match_id, [(me.token, command, "chain-ok-1"),
                                                         ("forged", command, "chain-forged-1")])
    assert (stale.refusal.code, forged.refusal.code, forged.refusal.index) == ("stale_version", "bad_token", 1)
    refused = [line for line in captured if line["event"] == "rpc_refused"]
    assert [(r["rpc"], r["status"], r["code"], r["match_id"], r["command_id"], r["index"]) for r in refused] == [
        ("SubmitCommands", "ABORTED", "stale_version", match.match_id, "chain-stale-1", 0),
        ("SubmitCommands", "UNAUTHENTICATED", "bad_token", match.match_id, "chain-forged-1", 1)]
    client.close()


def test_only_an_operator_may_create_a_match_that_names_players_or_a_tournament(command_address: str) -> None:
    """The read models rate and rank a match by the player ids its seats name and file it under
    its tournament: a client creating a match that names them could play every seat itself and
    rate any player it likes (or rename one: a player's name is the newest match's), or slip its
    results into a tournament's standings. Only a service holding the deployment's secret (the
    matchmaker, the tournament runner) may name them, with an operator token; anyone still
    creates an unattributed match, bot seats included."""
    from famiglia.auth import TokenSigner

    from .conftest import SECRET

    client = ReflectionClient(command_address)
    game_id = GAMES[0]
    seats = REGISTRY.get(game_id).info.min_players
    victim = [{"seat": 0, "player_id": "g-victim", "display_name": "Vito"}]

    def code_of(call) -> tuple[grpc.StatusCode, str]:
        with pytest.raises(grpc.RpcError) as exc:
            call()
        return exc.value.code(), error_code(exc.value)

    assert code_of(lambda: client.call(GS, "CreateMatch", game_id=game_id, seats=seats, seat_info=victim)) == \
        (grpc.StatusCode.UNAUTHENTICATED, "no_token")
    assert code_of(lambda: client.call(GS, "CreateMatch", game_id=game_id, seats=seats, tournament_id="t123")) == \
        (grpc.StatusCode.UNAUTHENTICATED, "no_token")
    signer = TokenSigner(SECRET)
    seat_token = client.call(GS, "CreateMatch", game_id=game_id, seats=seats).seat_tokens[0]
    for token in (seat_token, signer.player_token("g-attacker")):
        assert code_of(lambda: client.call(GS, "CreateMatch", token, game_id=game_id, seats=seats,  # noqa: B023
                                           seat_info=victim)) == \
            (grpc.StatusCode.PERMISSION_DENIED, "operator_only")
    forged = TokenSigner("not-the-secret").operator_token()
    assert code_of(lambda: client.call(GS, "CreateMatch", forged, game_id=game_id, seats=seats,
                                       seat_info=victim)) == (grpc.StatusCode.UNAUTHENTICATED, "bad_token")
    expired = signer.operator_token(ttl_s=1, now=1_000)
    assert code_of(lambda: client.call(GS, "CreateMatch", expired, game_id=game_id, seats=seats,
                                       seat_info=victim)) == (grpc.StatusCode.UNAUTHENTICATED, "bad_token")
    # an operator (the matchmaker, the tournament runner) names them
    made = client.call(GS, "CreateMatch", signer.operator_token("matchmaking"), game_id=game_id, seats=seats,
                       seat_info=victim, tournament_id="t123")
    assert len(made.seat_tokens) == seats
    # anyone: a match naming nobody, bots without a player id, a display name alone
    anonymous = [{"seat": 0, "display_name": "me"}, {"seat": 1, "bot": True, "policy": "random"}]
    assert len(client.call(GS, "CreateMatch", game_id=game_id, seats=seats, seat_info=anonymous).seat_tokens) == seats
    client.close()


def test_a_bot_seats_policy_is_checked_at_creation_and_a_dear_one_needs_an_operator(command_address: str) -> None:
    """A bot seat's policy is refused when the match is created (not played as `random` with an
    error in the bots' logs at every decision), and one that would think past the public budget
    (`famiglia.bots.policy.PUBLIC_BUDGET`: about a CPU second a decision) needs an operator
    token: an anonymous client could otherwise hold every bot worker with hour-long decisions."""
    from famiglia.auth import TokenSigner

    from .conftest import SECRET

    client = ReflectionClient(command_address)
    game_id = GAMES[0]
    seats = REGISTRY.get(game_id).info.min_players

    def create(policy: str, token: str | None = None):
        return client.call(GS, "CreateMatch", token, game_id=game_id, seats=seats,
                           seat_info=[{"seat": 1, "bot": True, "policy": policy}])

    def code_of(policy: str, token: str | None = None) -> tuple[grpc.StatusCode, str, str]:
        with pytest.raises(grpc.RpcError) as exc:
            create(policy, token)
        return exc.value.code(), error_code(exc.value), exc.value.details()

    operator = TokenSigner(SECRET).operator_token("admin")
    for policy, code in (("grandmaster", "unknown_policy"), ("ismcts?iterations=0", "bad_policy_params"),
                         ("ismcts?depth=3", "bad_policy_params"), ("heuristic?samples=x", "bad_policy_params")):
        for token in (None, operator):
            got = code_of(policy, token)
            assert got[:2] == (grpc.StatusCode.INVALID_ARGUMENT, code), (policy, got)
            assert "seat 1" in got[2]
    for dear in ("ismcts?seconds=3600", "ismcts?iterations=100000", "heuristic?samples=64"):
        got = code_of(dear)
        assert got[:2] == (grpc.StatusCode.UNAUTHENTICATED, "no_token") and dear.partition("?")[2] in got[2], got
        assert len(create(dear, operator).seat_tokens) == seats  # an operator may
    # within the budget, anyone; a seat that is no bot is not read as one
    for cheap in ("random", "", "heuristic", "ismcts", "ismcts?iterations=1000&seconds=1"):
        assert len(create(cheap).seat_tokens) == seats
    assert len(client.call(GS, "CreateMatch", game_id=game_id, seats=seats,
                           seat_info=[{"seat": 0, "display_name": "me", "policy": "grandmaster"}]).seat_tokens) == seats
    client.close()
