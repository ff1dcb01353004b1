"""`famiglia matchmake` refuses what the server would refuse before it registers a guest."""

from __future__ import annotations

import pytest

from famiglia.cli.main import main

# Nothing listens here: a command that reached for the server would fail with UNAVAILABLE instead.
NOWHERE = ["--address", "127.0.0.1:1", "--timeout", "1"]


@pytest.mark.parametrize(("argv", "says"), [
    (["matchmake", "goodcritter"], "no game 'goodcritter'"),
    (["matchmake", "grifters", "--seats", "9"], "grifters seats 2-4, not 9"),
    (["matchmake", "grifters", "--option", "max_rounds=x"], "GR-F01"),
    (["matchmake", "grifters", "--option", "no_such=1"], "unknown_option"),
])
def test_a_ticket_the_game_would_refuse_registers_nobody(argv: list[str], says: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, *NOWHERE]) == 2
    out = capsys.readouterr().out
    assert "bad request" in out and says in out and "UNAVAILABLE" not in out and "guest" not in out


def test_a_good_ticket_goes_to_the_server(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matchmake", "grifters", "--seats", "3,4", *NOWHERE]) == 2
    assert "UNAVAILABLE" in capsys.readouterr().out  # it asked the server: nobody is there
