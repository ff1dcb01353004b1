"""`famiglia ...` prints what servers and people supply (ids, names, entrants, refusals, game
text) as it is: a `[/x]` in one, read as rich markup, was a MarkupError and its traceback, exit
1, instead of the answer (as `famiglia matchmake`'s once were). And a Ctrl-C is answered at once."""

from __future__ import annotations

import argparse
import io
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from rich.console import Console

from famiglia.cli import main as cli_main
from famiglia.cli import match as cli_match
from famiglia.cli import projection as cli_projection
from famiglia.cli import replay as cli_replay
from famiglia.cli import tournament as cli_tournament
from famiglia.cli.play import PlayedMatch
from famiglia.v1 import query_service_pb2 as qpb
from famiglia.v1 import replay_service_pb2 as rpb
from famiglia.v1 import tournament_service_pb2 as tpb

WORDS = "[/x]"


class Refused(grpc.RpcError):
    def __init__(self, status: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self._status, self._details = status, details

    def code(self) -> grpc.StatusCode:
        return self._status

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> list[tuple[str, str]]:
        return []


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FAMIGLIA_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("FAMIGLIA_SECRET", "x")


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli_main.main(argv)
    return code, capsys.readouterr().out


def test_match_cancel_prints_a_request_id_it_was_given_as_it_is(monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The match was cancelled, then printing `--request-id [/x]` raised: exit 1 and a traceback
    for a cancel that went through."""

    class Client:
        def __init__(self, *_a: Any) -> None: ...
        def cancel_match(self, *_a: Any, **_k: Any) -> Any:
            return argparse.Namespace(duplicate=False, version=7)
        def close(self) -> None: ...

    monkeypatch.setattr(cli_match, "GameClient", Client)
    code, out = _run(["match", "--address", "x:1", "cancel", "m1", "--reason", "r", "--request-id", WORDS], capsys)
    assert code == 0
    assert f"request id {WORDS}" in out


def test_replay_prints_a_refusal_quoting_the_event_id_as_it_is(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    class Client:
        def state_at(self, event_id: str, **_k: Any) -> Any:
            raise Refused(grpc.StatusCode.NOT_FOUND, f"no event {event_id}")

    monkeypatch.setattr(cli_replay, "_client", lambda _args: Client())
    code, out = _run(["replay", WORDS], capsys)
    assert code == 2
    assert f"NOT_FOUND: no event {WORDS}" in out


def test_replay_shows_the_games_text_and_event_types_as_they_are(capsys: pytest.CaptureFixture[str]) -> None:
    class Client:
        def state_at(self, event_id: str, **_k: Any) -> rpb.GetStateAtResponse:
            return rpb.GetStateAtResponse(match_id="m1", game_id="g", event_id=event_id, seq=1, last_seq=1,
                                          text=f"hand {WORDS}")

        def events(self, match_id: str, **_k: Any) -> list[rpb.MatchEventInfo]:
            return [rpb.MatchEventInfo(event_id="e1", seq=1, type=f"dealt{WORDS}")]

    out = Console(file=io.StringIO(), width=100)
    assert cli_replay.step_through(Client(), "e1", ask=lambda _prompt: "q", out=out) == 0
    shown = out.file.getvalue()  # type: ignore[attr-defined]
    assert f"hand {WORDS}" in shown and f"dealt{WORDS}" in shown
    assert cli_replay.list_events(Client(), "m1") == 0
    assert f"dealt{WORDS}" in capsys.readouterr().out


def test_the_leaderboard_shows_a_players_chosen_name_as_it_is(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A guest's display name is theirs to choose: one `[/x]` broke the leaderboard for everyone."""

    class Stub:
        def GetLeaderboard(self, *_a: Any, **_k: Any) -> qpb.GetLeaderboardResponse:
            return qpb.GetLeaderboardResponse(entries=[qpb.LeaderboardEntry(rank=1, player_id="p1",
                                                                            display_name=WORDS)])

        def ListMatches(self, *_a: Any, **_k: Any) -> qpb.ListMatchesResponse:
            return qpb.ListMatchesResponse(matches=[qpb.MatchRecord(
                match_id="m1", game_id="g", rematch_of=WORDS,
                seats=[qpb.SeatRecord(seat=0, player_id=WORDS, winner=True)])])

    monkeypatch.setattr(cli_projection, "_stub", lambda _address: Stub())
    code, out = _run(["projection", "leaderboard", "g"], capsys)
    assert code == 0 and WORDS in out
    code, out = _run(["projection", "matches"], capsys)
    assert code == 0 and WORDS in out


def test_tournaments_show_their_names_and_entrants_as_they_are(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A tournament's name and entrants are the operator's words (`--name`, `--entrants`)."""
    t = tpb.Tournament(tournament_id="t1", name=f"cup {WORDS}", status=tpb.TOURNAMENT_FINISHED,
                       standings=[tpb.Standing(game_id="g", entrant=f"bot{WORDS}", matches=1)],
                       matches=[tpb.MatchSummary(game_id="g", match_id="m1", entrants=[f"bot{WORDS}"], ranks=[1])])

    class Client:
        def list(self, limit: int = 20) -> list[tpb.Tournament]:
            return [t]

        def get(self, *_a: Any, **_k: Any) -> tpb.Tournament:
            return t

    monkeypatch.setattr(cli_tournament, "_client", lambda _args: Client())
    code, out = _run(["tournament", "list"], capsys)
    assert code == 0 and WORDS in out
    code, out = _run(["tournament", "show", "t1", "--matches"], capsys)
    assert code == 0 and f"bot{WORDS}" in out


def test_played_matches_show_the_servers_ids_as_they_are() -> None:
    out = Console(file=io.StringIO(), width=160)
    out.print(cli_main.results_table([PlayedMatch(f"g{WORDS}", f"m{WORDS}", 2)]))
    assert f"m{WORDS}" in out.file.getvalue()  # type: ignore[attr-defined]


def test_ctrl_c_during_play_stops_the_matches_in_play_and_starts_no_other(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while `famiglia play` followed its matches waited for every planned match to be
    played out (minutes, the terminal deaf) before it was answered."""
    started: list[int] = []
    stopped: list[bool] = []
    playing = threading.Event()
    sleep = time.sleep

    def play_match(client: Any, game_id: str, seats: int, *, stop: threading.Event | None = None,
                   **_k: Any) -> PlayedMatch:
        started.append(seats)
        playing.set()
        for _ in range(300):  # a long match: some 3 s of moves
            if stop is not None and stop.is_set():
                stopped.append(True)
                break
            sleep(0.01)
        else:
            stopped.append(False)
        return PlayedMatch(game_id, "m", seats)

    def ctrl_c(_seconds: float) -> None:
        playing.wait()
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "play_match", play_match)
    monkeypatch.setattr(cli_main.time, "sleep", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        cli_main.play_matches(object(), [("g", 2)] * 4, seed=1, workers=1)  # type: ignore[arg-type]
    assert started == [2]
    assert stopped == [True]


@pytest.mark.parametrize("target", ["verify", "import", "export", "events"])
def test_replay_without_its_file_or_match_is_bad_input_not_a_divergence(target: str,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`famiglia replay verify` with no FILE left with 1, the status docs/replay.md gives to a
    divergence (and, for `import`, to a match stored unverified)."""
    with pytest.raises(SystemExit) as left:
        cli_main.main(["replay", target])
    assert left.value.code == 2
    assert f"usage: famiglia replay {target}" in capsys.readouterr().err


def test_a_backfill_stopped_by_ctrl_c_says_where_to_resume(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """docs/operations.md: an interrupted run (Ctrl-C, Redis away) says where it stopped. Ctrl-C
    said only "interrupted": the cursor was in the page lines above, if the scrollback kept them."""
    import services.command.bootstrap as command_bootstrap
    import services.command.player_index as player_index

    class App:
        def close(self) -> None: ...

    def reindex_players(app: Any, *, cursor: int, on_page: Any, **_k: Any) -> Any:
        on_page(player_index.Reindexed(cursor=123, looked_at=500))  # a page done ...
        raise KeyboardInterrupt  # ... and Ctrl-C while the next one was read

    monkeypatch.setattr(command_bootstrap, "bootstrap", lambda **_k: App())
    monkeypatch.setattr(player_index, "reindex_players", reindex_players)
    code, out = _run(["match", "reindex-players", "--cursor", "77"], capsys)
    assert code == 130
    assert out.splitlines()[-2:] == ["stopped; resume with --cursor 123", "interrupted (SIGINT)"]
