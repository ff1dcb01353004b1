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
