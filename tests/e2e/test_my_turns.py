"""ListMyTurns over real gRPC (every service in this process, one real redis-server): a guest of
matchmaking (`RegisterGuest`: a player token) seated at matches an operator created, asking with
that token alone where it is its turn, as the SDK does it."""

from __future__ import annotations

import random

import grpc
import pytest

from famiglia.auth import TokenSigner
from famiglia.client import GameClient
from famiglia.grpcutil.errors import error_code
from famiglia.v1 import envelope_pb2
from famiglia.v1 import game_service_pb2 as game_pb
from famiglia.v1 import matchmaking_service_pb2 as mm_pb
from tests.e2e.conftest import SECRET, Services, Stack

SIGNER = TokenSigner(SECRET)


def _md(token: str | None) -> list[tuple[str, str]] | None:
    return None if token is None else [("authorization", f"Bearer {token}")]


def guest(s: Services, name: str) -> mm_pb.RegisterGuestResponse:
    return s.players.RegisterGuest(mm_pb.RegisterGuestRequest(display_name=name), timeout=30)


def seated(s: Services, game_id: str, seats: int, seed: int, **players: str) -> game_pb.CreateMatchResponse:
    """A match whose `players` (seat name "s0", "s1"... -> player id) sit where named, as the matchmaker
    creates one (an operator token)."""
    info = [envelope_pb2.SeatInfo(seat=int(seat[1:]), player_id=pid) for seat, pid in players.items()]
    return s.game.CreateMatch(game_pb.CreateMatchRequest(game_id=game_id, seats=seats, seed=seed, seat_info=info),
                              metadata=_md(SIGNER.operator_token("e2e")))


def asked(s: Services, match: game_pb.CreateMatchResponse) -> set[int]:
    """The seats the game waits for, each as its own GetView says."""
    return {seat for seat, token in enumerate(match.seat_tokens)
            if seat in {p.seat for p in s.game.GetView(game_pb.GetViewRequest(match_id=match.match_id),
                                                       metadata=_md(token)).to_act}}


def play_until(s: Services, match: game_pb.CreateMatchResponse, done, seed: int = 1, most: int = 600) -> None:
    """Random legal commands of the seats asked until `done(match)`, or the match's end."""
    rng = random.Random(seed)
    for i in range(most):
        if done(match):
            return
        view = s.game.GetView(game_pb.GetViewRequest(match_id=match.match_id))
        if view.finished:
            return
        seats = asked(s, match)
        seat = rng.choice(sorted(seats))
        token = match.seat_tokens[seat]
        legal = s.game.ListLegalCommands(game_pb.ListLegalCommandsRequest(match_id=match.match_id),
                                         metadata=_md(token))
        s.game.SubmitCommand(game_pb.SubmitCommandRequest(match_id=match.match_id, command_id=f"c{i}",
                                                          command=rng.choice(legal.commands)), metadata=_md(token))
    raise AssertionError("not done")


def as_own_view(s: Services, match: game_pb.CreateMatchResponse, mine: game_pb.MyMatch) -> tuple[bool, int, int]:
    view = s.game.GetView(game_pb.GetViewRequest(match_id=match.match_id), metadata=_md(match.seat_tokens[mine.seat]))
    own = [p for p in view.to_act if p.seat == mine.seat]
    return bool(own), own[0].deadline_ms if own else 0, view.version


@pytest.fixture()
def s(stubs: Services) -> Services:
    return stubs


def test_a_guest_sees_where_it_is_its_turn_with_its_player_token_only(s: Services, stack: Stack) -> None:
    ann, bob = guest(s, "Ann"), guest(s, "Bob")
    probe = s.game.CreateMatch(game_pb.CreateMatchRequest(game_id="grifters", seats=2, seed=5))
    first = min(asked(s, probe))
    waiting = seated(s, "grifters", 2, 5, **{f"s{first}": ann.player_id, f"s{1 - first}": bob.player_id})
    idle = seated(s, "grifters", 2, 5, **{f"s{1 - first}": ann.player_id})
    client = GameClient(stack.addresses["GameService"])
    try:
        mine = client.my_turns(ann.player_token)
        assert [(m.match_id, m.seat, m.to_act, m.finished) for m in mine] == \
            [(waiting.match_id, first, True, False), (idle.match_id, 1 - first, False, False)]
        for m, match in zip(mine, (waiting, idle), strict=True):
            assert m.game_id == "grifters" and (m.to_act, m.deadline_ms, m.version) == as_own_view(s, match, m)
            assert m.seat_token == match.seat_tokens[m.seat]  # a lost seat token, given back
        assert [m.match_id for m in client.my_turns(ann.player_token, limit=1)] == [waiting.match_id]
        # bob's move once ann moved: the list follows the match
        play_until(s, waiting, lambda match: first not in asked(s, match))
        (bobs,) = client.my_turns(bob.player_token)
        assert (bobs.match_id, bobs.to_act) == (waiting.match_id, (1 - first) in asked(s, waiting))
    finally:
        client.close()


def test_a_simultaneous_decision_and_a_private_window_are_told_as_each_seats_own_view(s: Services) -> None:
    people = [guest(s, name) for name in ("Ann", "Bob", "Cat")]
    critters = seated(s, "goodcritters", 4, 3, s1=people[0].player_id, s2=people[1].player_id)
    play_until(s, critters, lambda match: {1, 2} <= asked(s, match))
    for person in people[:2]:
        (mine,) = s.game.ListMyTurns(game_pb.ListMyTurnsRequest(), metadata=_md(person.player_token)).matches
        assert mine.to_act and (mine.to_act, mine.deadline_ms, mine.version) == as_own_view(s, critters, mine)
    # Nothing Personal: a window asks only the seat holding the card; the others are told nothing of it
    np = seated(s, "nothing_personal", 3, 0, **{f"s{i}": p.player_id for i, p in enumerate(people)})

    def window_open(match: game_pb.CreateMatchResponse) -> bool:
        public = {p.seat for p in s.game.GetView(game_pb.GetViewRequest(match_id=match.match_id)).to_act}
        return bool(asked(s, match) - public) and len(asked(s, match)) < 3

    play_until(s, np, window_open)
    public = {p.seat for p in s.game.GetView(game_pb.GetViewRequest(match_id=np.match_id)).to_act}
    private = asked(s, np) - public
    told = {}
    for seat, person in enumerate(people):
        found = [m for m in s.game.ListMyTurns(game_pb.ListMyTurnsRequest(), metadata=_md(person.player_token)).matches
                 if m.match_id == np.match_id]
        (mine,) = found
        assert (mine.to_act, mine.deadline_ms, mine.version) == as_own_view(s, np, mine)
        told[seat] = mine.to_act
    assert {seat for seat, to_act in told.items() if to_act} == private | public
    assert any(not to_act for to_act in told.values())  # someone not told of the window


def test_a_finished_and_a_cancelled_match_drop_out(s: Services) -> None:
    ann, bob = guest(s, "Ann"), guest(s, "Bob")
    played = seated(s, "grifters", 2, 2, s0=ann.player_id, s1=bob.player_id)
    stopped = seated(s, "grifters", 2, 3, s1=ann.player_id)

    def listed(who: mm_pb.RegisterGuestResponse) -> set[str]:
        return {m.match_id for m in s.game.ListMyTurns(game_pb.ListMyTurnsRequest(),
                                                       metadata=_md(who.player_token)).matches}

    assert listed(ann) == {played.match_id, stopped.match_id}
    s.game.CancelMatch(game_pb.CancelMatchRequest(match_id=stopped.match_id, reason="stuck"),
                       metadata=_md(SIGNER.operator_token("e2e")))
    assert listed(ann) == {played.match_id}
    play_until(s, played, lambda match: False)
    assert s.game.GetView(game_pb.GetViewRequest(match_id=played.match_id)).finished
    assert listed(ann) == listed(bob) == set()


def test_a_call_without_a_player_token_is_unauthenticated(s: Services) -> None:
    match = s.game.CreateMatch(game_pb.CreateMatchRequest(game_id="grifters", seats=2, seed=1))
    for token, code in ((None, "no_token"), ("garbage", "bad_token"), (match.seat_tokens[0], "bad_token"),
                        (SIGNER.operator_token("e2e"), "bad_token"), (SIGNER.player_token("p")[:-2] + "xx", "bad_token"),
                        (TokenSigner("another-secret").player_token("p"), "bad_token")):
        with pytest.raises(grpc.RpcError) as raised:
            s.game.ListMyTurns(game_pb.ListMyTurnsRequest(), metadata=_md(token), timeout=30)
        assert (raised.value.code(), error_code(raised.value)) == (grpc.StatusCode.UNAUTHENTICATED, code), token
