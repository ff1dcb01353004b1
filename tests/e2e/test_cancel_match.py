"""CancelMatch end to end: over real gRPC against a real redis-server, an operator ends a
match; its follower sees why and the stream ends, and every later call says it is over."""

from __future__ import annotations

import queue
import threading

import grpc
import pytest

from famiglia.auth import TokenSigner
from famiglia.client import GameClient
from famiglia.grpcutil.errors import error_code
from famiglia.v1 import envelope_pb2

from .conftest import SECRET, Stack, match_and_first_move


def _refusal(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as exc:
        call()
    return exc.value.code(), error_code(exc.value)


def test_an_operator_cancels_a_match_and_every_client_sees_it_over(command_address: str) -> None:
    client = GameClient(command_address)
    try:
        match, me, command = match_and_first_move(client, seed=11)
        operator = TokenSigner(SECRET).operator_token("support", ttl_s=60)
        replies: queue.Queue = queue.Queue()

        def follow() -> None:
            for reply in client.spectator(match.match_id).stream(0, timeout=60):
                replies.put(reply)
            replies.put(None)  # the stream ended with OK

        threading.Thread(target=follow, daemon=True).start()
        # Not anyone's to ask: without a token, with a seat token, with a forged one.
        cancel = client.cancel_match
        assert _refusal(lambda: cancel(match.match_id, "x", token="")) == (grpc.StatusCode.UNAUTHENTICATED, "no_token")
        assert _refusal(lambda: cancel(match.match_id, "x", token=match.seat_tokens[0])) == (
            grpc.StatusCode.PERMISSION_DENIED, "operator_only")
        assert _refusal(lambda: cancel(match.match_id, "", token=operator)) == (
            grpc.StatusCode.INVALID_ARGUMENT, "no_reason")
        assert not me.view().finished

        done = cancel(match.match_id, "a player reported cheating", token=operator, request_id="support-1")
        assert not done.duplicate
        again = cancel(match.match_id, "a player reported cheating", token=operator, request_id="support-1")
        assert again.duplicate and again.version == done.version
        assert _refusal(lambda: cancel(match.match_id, "again", token=operator, request_id="support-2")) == (
            grpc.StatusCode.FAILED_PRECONDITION, "match_over")

        seen = []
        while (reply := replies.get(timeout=30)) is not None:
            seen.append(reply)
        last_event, end = seen[-2], seen[-1]
        assert end.finished and not end.HasField("event") and end.version == done.version
        assert last_event.event.type == "match_cancelled" and last_event.event.seat == -1
        assert last_event.event.command_id == ""  # the operator's request id is not the table's
        cancelled = envelope_pb2.MatchCancelled()
        assert last_event.event.event.Unpack(cancelled)
        assert (cancelled.reason, cancelled.operator) == ("a player reported cheating", "support")

        view = me.view()
        assert view.finished and view.cancelled and view.cancel_reason == "a player reported cheating"
        assert not view.to_act and not view.result.seats and view.text
        assert not me.legal_commands().commands
        assert _refusal(lambda: me.submit(command, expected_version=view.version)) == (
            grpc.StatusCode.FAILED_PRECONDITION, "match_over")
    finally:
        client.close()


def test_the_cli_cancels_a_match_as_an_operator(command_address: str, monkeypatch, capsys) -> None:
    from famiglia.cli.main import main

    monkeypatch.setenv("FAMIGLIA_SECRET", SECRET)  # the operator token is minted from the deployment's secret
    client = GameClient(command_address)
    try:
        match, me, _command = match_and_first_move(client, seed=12)
        cancel = ["match", "--address", command_address, "cancel", match.match_id, "--reason", "orphaned seats"]
        assert main([*cancel, "--request-id", "ops-1"]) == 0
        assert main([*cancel, "--request-id", "ops-1"]) == 0  # a retry: answered as the first
        said = capsys.readouterr().out
        assert "cancelled at version" in said and "already, by this request id" in said
        assert main(cancel) == 2  # a new cancel of a match over: its status and code, one line
        assert "FAILED_PRECONDITION: match_over: the match was cancelled" in capsys.readouterr().out
        view = me.view()
        assert view.cancelled and view.cancel_reason == "orphaned seats"
    finally:
        client.close()


def test_the_sweep_cancels_the_live_matches_idle_for_days_and_no_other(stack: Stack, monkeypatch, capsys) -> None:
    """`famiglia match sweep`: the live matches of the read models whose last event is older
    than --idle-days are cancelled (a dry run only lists them), each at the version projected,
    under a request id of its own (a second sweep is answered as the first); a match that moved
    since its projection, a fresh one and one over are left alone."""
    from sqlalchemy import update

    from famiglia.cli.main import main
    from famiglia.readmodels.tables import Match

    monkeypatch.setenv("FAMIGLIA_SECRET", SECRET)
    operator = TokenSigner(SECRET).operator_token("support", ttl_s=60)
    client = GameClient(stack.addresses["GameService"])
    try:
        idle, idle_seat, _ = match_and_first_move(client, seed=21)
        moved, moved_seat, move = match_and_first_move(client, seed=22)
        fresh, fresh_seat, _ = match_and_first_move(client, seed=23)
        over, _, _ = match_and_first_move(client, seed=24)
        client.cancel_match(over.match_id, "done with", token=operator)
        for match in (idle, moved, fresh, over):
            stack.projection.unpark(match.match_id)
        with stack.projection.sql.begin() as conn:  # their last events ten days ago, as the read models say
            conn.execute(update(Match).where(Match.match_id.in_([idle.match_id, moved.match_id, over.match_id]))
                         .values(last_event_ms=Match.last_event_ms - 10 * 86_400_000))
        moved_seat.submit(move)  # it moves on, after its projection

        sweep = ["match", "--address", stack.addresses["GameService"], "sweep", "--idle-days", "7",
                 "--query-address", stack.addresses["QueryService"]]
        assert main([*sweep, "--dry-run"]) == 0
        listed = capsys.readouterr().out
        swept = {line.split(":")[0] for line in listed.splitlines() if ": idle since " in line}
        assert swept == {idle.match_id, moved.match_id} and "2 live matches idle for 7 days" in listed
        assert not idle_seat.view().finished  # a dry run cancels nothing

        assert main(sweep) == 0
        said = capsys.readouterr().out
        assert f"{idle.match_id}: cancelled at version" in said
        assert f"{moved.match_id}: left: ABORTED: stale_version" in said and "1 idle matches cancelled, 1 left" in said
        view = idle_seat.view()
        assert view.cancelled and view.cancel_reason == "swept: no event for 7 days"
        assert not moved_seat.view().finished and not fresh_seat.view().finished

        assert main(sweep) == 0  # the read models not caught up yet: the same cancel, answered as the first
        again = capsys.readouterr().out
        assert f"{idle.match_id}: cancelled at version {view.version} (already, by an earlier sweep)" in again
    finally:
        client.close()
