"""`famiglia match allow-rematch`: an operator lets the table of a match whose bots think past the
public budget ask for its rematch (AskRematch with an operator token)."""

from __future__ import annotations

import pytest

from famiglia.auth import TokenSigner
from famiglia.cli import match as cli
from famiglia.cli.main import build_parser
from famiglia.v1 import game_service_pb2 as pb


class _Client:
    asked: list[tuple[str, str]] = []
    answer = pb.RematchResponse(waiting_for=[0, 2])

    def __init__(self, address: str) -> None:
        self.address = address

    def allow_rematch(self, match_id: str, *, token: str) -> pb.RematchResponse:
        _Client.asked.append((match_id, token))
        return _Client.answer

    def close(self) -> None:
        pass


def test_an_operator_allows_a_rematch(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FAMIGLIA_SECRET", "cli-test-secret")
    monkeypatch.setattr(cli, "GameClient", _Client)
    monkeypatch.setattr(_Client, "asked", [])
    args = build_parser().parse_args(["match", "allow-rematch", "m0000000000000000001"])
    assert args.func(args) == 0
    (match_id, token), = _Client.asked
    assert match_id == "m0000000000000000001" and TokenSigner("cli-test-secret").read_operator(token) == "cli"
    assert "rematch allowed; seat(s) 0, 2 to ask" in " ".join(capsys.readouterr().out.split())


def test_a_table_that_asked_already_is_told_its_rematch_is_being_made(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Nobody left to ask and no rematch yet: not "seat(s)  to ask" with an empty list."""
    monkeypatch.setenv("FAMIGLIA_SECRET", "cli-test-secret")
    monkeypatch.setattr(cli, "GameClient", _Client)
    monkeypatch.setattr(_Client, "asked", [])
    monkeypatch.setattr(_Client, "answer", pb.RematchResponse(asked=[0, 1]))
    args = build_parser().parse_args(["match", "allow-rematch", "m0000000000000000001"])
    assert args.func(args) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "every person at its table asked, the rematch is being made" in out and "seat(s)" not in out
