"""`famiglia projection ...` — the read models from the command line.

    famiglia projection rebuild                 every read model again from the archive and the streams
    famiglia projection migrate                 bring the SQL schema to head
    famiglia projection diverged                matches whose event store went back and was written on
    famiglia projection matches [--game G] [--status live]   the newest matches (QueryService),
                                                and the series among them (a rematch, the match it follows)
    famiglia projection leaderboard GAME        a game's ratings (QueryService)

`rebuild`, `migrate` and `diverged` run the projection service's own command
(`python -m services.projection ...`) with this environment, so they use the
same FAMIGLIA_REDIS_URL / FAMIGLIA_DATABASE_URL as the service (the embedded
stack's by default).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import sys

import grpc
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from famiglia.cli import add_column, add_plain_row
from famiglia.config import Settings
from famiglia.grpcutil.tls import dial

console = Console()

STATUSES = ("live", "finished", "cancelled")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "projection", help="rebuild or query the SQL read models",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="projection_cmd", required=True)
    rebuild = sub.add_parser("rebuild", help="rebuild every read model from the archive and the streams")
    rebuild.set_defaults(func=cmd_service, service_args=["rebuild"])
    migrate = sub.add_parser("migrate", help="bring the SQL schema to head")
    migrate.set_defaults(func=cmd_service, service_args=["migrate"])
    diverged = sub.add_parser("diverged", help="the matches a rebuild must take from the event store "
                                               "(it lost acknowledged writes and was written on since)")
    diverged.set_defaults(func=cmd_service, service_args=["diverged"])
    matches = sub.add_parser("matches", help="the newest matches")
    matches.add_argument("--game", default="")
    matches.add_argument("--player", default="")
    matches.add_argument("--status", choices=STATUSES, default="",
                         help="only matches in play (live: a stuck one shows an old last event), finished or cancelled")
    matches.add_argument("--limit", type=int, default=20)
    matches.add_argument("--address", default="", help="projection service (default: FAMIGLIA_PROJECTION_ADDR; grpcs://: TLS)")
    matches.set_defaults(func=cmd_matches)
    board = sub.add_parser("leaderboard", help="a game's OpenSkill leaderboard")
    board.add_argument("game")
    board.add_argument("--limit", type=int, default=20)
    board.add_argument("--address", default="", help="projection service (default: FAMIGLIA_PROJECTION_ADDR; grpcs://: TLS)")
    board.set_defaults(func=cmd_leaderboard)


def cmd_service(args: argparse.Namespace) -> int:
    child = subprocess.Popen([sys.executable, "-m", "services.projection", *args.service_args])
    try:
        return child.wait()
    except KeyboardInterrupt as exc:
        # The child stops its own way (one line, 130) and is waited for: killed (subprocess.call)
        # it printed its traceback, or was cut off halfway through a rebuild. A terminal's Ctrl-C
        # reached it too; a signal that reached only us (`kill`, SIGTERM/SIGHUP) is passed on.
        if getattr(exc, "signum", None) is None:  # Ctrl-C: the child's own, a moment to take it
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=5)
        if child.poll() is None:
            child.send_signal(signal.SIGINT)
            child.wait()
        raise


def _stub(address: str):  # type: ignore[no-untyped-def]
    from famiglia.v1 import query_service_pb2_grpc as pb_grpc

    return pb_grpc.QueryServiceStub(dial(address or Settings.from_env().projection_addr))


def cmd_matches(args: argparse.Namespace) -> int:
    from famiglia.v1 import query_service_pb2 as pb

    status = pb.MatchStatus.Value(f"MATCH_STATUS_{(args.status or 'unspecified').upper()}")
    try:
        reply = _stub(args.address).ListMatches(
            pb.ListMatchesRequest(game_id=args.game, player_id=args.player, status=status, page_size=args.limit),
            timeout=10)
    except grpc.RpcError as exc:
        console.print(f"[red]{exc.code().name}[/]: {escape(exc.details() or '')}")  # type: ignore[attr-defined]
        return 2
    # Newest created first; the last event's time (UTC) tells a stuck match (live, quiet for long)
    # from one in play. Light borders and whole cells, as the standings: 80 columns when piped.
    table = Table(title="Matches, newest first", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
                  collapse_padding=True)
    for column in ("match id", "game", "status", "seats", "last event", "winner(s)"):
        add_column(table, column, no_wrap=column != "winner(s)",
                   min_width={"status": 9, "last event": 14}.get(column))
    for m in reply.matches:
        winners = ", ".join(s.player_id or f"seat {s.seat}" for s in m.seats if s.winner)
        add_plain_row(table, m.match_id, m.game_id, pb.MatchStatus.Name(m.status).removeprefix("MATCH_STATUS_").lower(),
                      str(len(m.seats)), _utc(m.last_event_at), winners)
    console.print(table)
    series = series_table(reply.matches)
    if series is not None:
        console.print(series)
    return 0


def series_table(matches) -> Table | None:  # type: ignore[no-untyped-def]
    """The listed matches that are a rematch or have one (AskRematch), in the list's order, with
    both links as whole ids (an operator copies them): a table of their own, as three ids more
    in the list would not fit 80 columns. None when no listed match is in a series."""
    linked = [m for m in matches if m.rematch_of or m.rematch_id]
    if not linked:
        return None
    table = Table(title="Series (AskRematch)", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
                  collapse_padding=True)
    for column in ("match id", "rematch of", "rematch"):
        add_column(table, column, no_wrap=True)
    for m in linked:
        add_plain_row(table, m.match_id, m.rematch_of or "-", m.rematch_id or "-")
    return table


def _utc(stamp) -> str:  # type: ignore[no-untyped-def]
    return stamp.ToDatetime().strftime("%m-%d %H:%M:%S") if stamp.seconds or stamp.nanos else ""


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from famiglia.v1 import query_service_pb2 as pb

    try:
        reply = _stub(args.address).GetLeaderboard(pb.GetLeaderboardRequest(game_id=args.game, limit=args.limit),
                                                   timeout=10)
    except grpc.RpcError as exc:
        console.print(f"[red]{exc.code().name}[/]: {escape(exc.details() or '')}")  # type: ignore[attr-defined]
        return 2
    table = Table(title=f"{escape(args.game)} leaderboard (OpenSkill, ordinal = mu - 3 sigma)")
    for column in ("#", "player", "bot", "ordinal", "mu", "sigma", "matches", "wins"):
        table.add_column(column)
    for e in reply.entries:
        add_plain_row(table, str(e.rank), e.display_name or e.player_id, e.policy if e.bot else "", f"{e.ordinal:.2f}",
                      f"{e.mu:.2f}", f"{e.sigma:.2f}", str(e.matches), str(e.wins))
    console.print(table)
    return 0


def tournament_table(tournament_id: str, *, expected_matches: int, address: str = "",
                     timeout: float = 60.0) -> Table | None:
    """A tournament's standings as the projection serves them (QueryService), once it has
    projected `expected_matches` finished matches; None when the projection is not there."""
    import time

    from famiglia.v1 import query_service_pb2 as pb

    stub = _stub(address)
    deadline = time.monotonic() + timeout
    reply = None
    while time.monotonic() < deadline:
        try:
            reply = stub.GetTournamentStandings(pb.GetTournamentStandingsRequest(tournament_id=tournament_id),
                                                timeout=5)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNAVAILABLE:  # type: ignore[attr-defined]
                return None
            reply = None
        if reply is not None and reply.matches_finished >= expected_matches:
            break
        time.sleep(0.5)
    if reply is None:
        return None
    # Light borders and whole cells: in 80 columns (a default terminal, a CI log, `| tee`) the boxed
    # table cut the entrant and the rating short ("heuris…", "36.3±7…").
    table = Table(title=f"Standings from the projection (QueryService) — {escape(reply.name)}, "
                        f"{reply.matches_finished} matches",
                  caption="an entrant in several seats of one match plays it once, at its best seat",
                  box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    for column in ("game", "#", "entrant", "played", "wins", "mean rank", "mu±sigma", "ordinal"):
        add_column(table, column, no_wrap=True, min_width=len(column),
                   justify="left" if column in ("game", "entrant") else "right")
    previous = ""
    for e in sorted(reply.standings, key=lambda e: (e.game_id, e.rank)):
        add_plain_row(table, e.game_id if e.game_id != previous else "", str(e.rank),
                      (e.policy or e.display_name).partition("?")[0],
                      str(e.played), str(e.wins), f"{e.average_rank:.2f}", f"{e.mu:.1f}±{e.sigma:.1f}",
                      f"{e.ordinal:.1f}")
        previous = e.game_id
    return table
