"""What `make run` prints last, read in an 80-column terminal (or a CI log, or `| tee`)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from famiglia.cli import projection
from famiglia.v1 import query_service_pb2 as pb


def test_the_final_standings_are_read_whole_in_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The projection's standings table cut the entrant and the rating short at 80 columns
    ("heuris…", "35.9±7…", a "mu±sig…" heading): what a newcomer reads the tournament by."""
    reply = pb.GetTournamentStandingsResponse(
        tournament_id="t1", name="make run (quick)", matches_finished=24, standings=[
            pb.StandingEntry(game_id="nothing_personal", rank=r, policy=p, played=6, wins=w, average_rank=a,
                             mu=mu, sigma=7.43, ordinal=mu - 3 * 7.43)
            for r, p, w, a, mu in ((1, "ismcts?iterations=16&seconds=0.03", 5, 1.17, 36.3),
                                   (2, "heuristic", 1, 2.0, 24.3), (3, "random", 0, 2.83, -14.7))])

    class _Stub:
        def GetTournamentStandings(self, request, timeout=None):  # type: ignore[no-untyped-def]  # noqa: N802
            return reply

    monkeypatch.setattr(projection, "_stub", lambda address: _Stub())
    table = projection.tournament_table("t1", expected_matches=24, timeout=5)
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(table)
    text = out.getvalue()
    assert "…" not in text and all(len(line) <= 80 for line in text.splitlines()), text
    for whole in ("nothing_personal", "heuristic", "ismcts", "36.3±7.4", "-14.7±7.4", "-37.0", "mean rank", "mu±sigma",
                  "ordinal"):
        assert whole in text, text
