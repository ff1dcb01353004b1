"""`famiglia matchmake` refuses what the server would refuse before it registers a guest."""

from __future__ import annotations

import pytest

from famiglia.cli.main import main

# Nothing listens here: a command that reached for the server would fail with UNAVAILABLE instead.
NOWHERE = ["--address", "127.0.0.1:1", "--timeout", "1"]


@pytest.mark.parametrize(("argv", "says"), [
    (["matchmake", "goodcritter"], "no game 'goodcritter'"),
    (["matchmake", "grifters", "--seats", "9"], "bad_seat_count"),
    (["matchmake", "grifters", "--seats", "2", "--option", "first_player_seat=2"], "at a table of 2"),
    (["matchmake", "grifters", "--option", "max_rounds=x"], "GR-F01"),
    (["matchmake", "grifters", "--option", "no_such=1"], "unknown_option"),
])
def test_a_ticket_the_game_would_refuse_registers_nobody(argv: list[str], says: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, *NOWHERE]) == 2
    out = capsys.readouterr().out
    assert "bad request" in out and says in out and "UNAVAILABLE" not in out and "guest" not in out


@pytest.mark.parametrize("argv", [
    ["matchmake", "grifters", "--seats", "3,4"],
    # the server's own rule: options some table size accepts (a seat 2 exists at 3 or 4 seats)
    ["matchmake", "grifters", "--option", "first_player_seat=2"],
    ["matchmake", "grifters", "--seats", "2,3", "--option", "first_player_seat=2"],
])
def test_a_ticket_some_table_accepts_goes_to_the_server(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, *NOWHERE]) == 2
    assert "UNAVAILABLE" in capsys.readouterr().out  # it asked the server: nobody is there
