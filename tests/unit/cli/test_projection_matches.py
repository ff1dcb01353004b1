"""`famiglia projection matches`: what an operator looks at to find a stuck match."""

from __future__ import annotations

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from famiglia.cli import projection as cli
from famiglia.cli.main import build_parser
from famiglia.v1 import query_service_pb2 as pb


class _Query:
    def __init__(self, reply: pb.ListMatchesResponse) -> None:
        self.reply, self.asked = reply, []

    def ListMatches(self, request: pb.ListMatchesRequest, timeout: float) -> pb.ListMatchesResponse:  # noqa: N802
        self.asked.append(request)
        return self.reply


def test_live_matches_are_listed_with_their_last_event(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A match nobody moves is live with an old last event. The command had no status filter and
    showed only the creation time: the newest matches, finished ones first, hid the stuck one."""
    stuck = pb.MatchRecord(match_id="m7276ad77d488e571b9c", game_id="goodcritters", status=pb.MATCH_STATUS_LIVE,
                           created_at=Timestamp(seconds=1_796_600_000), last_event_at=Timestamp(seconds=1_796_603_723))
    query = _Query(pb.ListMatchesResponse(matches=[stuck]))
    monkeypatch.setattr(cli, "_stub", lambda address: query)
    monkeypatch.setattr(cli, "console", cli.Console(width=80))  # piped output

    args = build_parser().parse_args(["projection", "matches", "--status", "live"])
    assert args.func(args) == 0
    assert [r.status for r in query.asked] == [pb.MATCH_STATUS_LIVE]
    shown = capsys.readouterr().out
    assert "m7276ad77d488e571b9c" in shown and "last event" in shown
    assert "12-07 00:35:23" in shown  # the last event, UTC


def test_a_status_the_query_service_does_not_know_is_refused_by_the_parser() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["projection", "matches", "--status", "stuck"])


def test_a_series_is_shown_both_ways(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The records name the match a rematch follows and the rematch made of a match (AskRematch);
    the list showed neither, so an operator could not tell a table's matches apart from others."""
    first, second, other = "m0000000000000000001", "m0000000000000000002", "m0000000000000000003"
    query = _Query(pb.ListMatchesResponse(matches=[
        pb.MatchRecord(match_id=second, game_id="grifters", status=pb.MATCH_STATUS_LIVE, rematch_of=first),
        pb.MatchRecord(match_id=other, game_id="grifters", status=pb.MATCH_STATUS_LIVE),
        pb.MatchRecord(match_id=first, game_id="grifters", status=pb.MATCH_STATUS_FINISHED, rematch_id=second),
    ]))
    monkeypatch.setattr(cli, "_stub", lambda address: query)
    monkeypatch.setattr(cli, "console", cli.Console(width=80))

    args = build_parser().parse_args(["projection", "matches"])
    assert args.func(args) == 0
    shown = capsys.readouterr().out
    series = shown[shown.index("Series"):]
    rows = [line.split() for line in series.splitlines() if line.strip().startswith("m0")]
    assert rows == [[second, first, "-"], [first, "-", second]]  # whole ids, to copy; the other left out


def test_no_series_table_without_a_series(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    query = _Query(pb.ListMatchesResponse(matches=[pb.MatchRecord(match_id="m1", game_id="grifters")]))
    monkeypatch.setattr(cli, "_stub", lambda address: query)
    args = build_parser().parse_args(["projection", "matches"])
    assert args.func(args) == 0
    assert "Series" not in capsys.readouterr().out
