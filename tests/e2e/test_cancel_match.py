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

from .conftest import SECRET, match_and_first_move


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
