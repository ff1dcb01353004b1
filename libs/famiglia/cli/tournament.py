"""`famiglia tournament ...` — bot tournaments on the bots service, and the main job of `make run`.

    famiglia tournament run [--game G ...] [--entrants random,heuristic,ismcts]
                            [--matches N | --round-robin] [--seats N ...]   create, follow, show standings
    famiglia tournament show TOURNAMENT_ID [--matches]                       progress and standings
    famiglia tournament list | cancel TOURNAMENT_ID
    famiglia tournament sweep --finished-days N [--dry-run]                 delete old tournaments' Redis records

Matches run on the Celery workers of the embedded stack (or wherever
FAMIGLIA_BOTS_ADDR points); each entrant is a bot policy, optionally with its
budget: `ismcts?iterations=200&seconds=0.5`. Creating and cancelling send an operator
token, minted from the deployment's secret (FAMIGLIA_SECRET, or the embedded stack's
var/secret; signed with FAMIGLIA_SECRET_ACCEPTED too when it is set, a secret rollover).
A creation goes under a random request id and, left without an answer (UNAVAILABLE,
DEADLINE_EXCEEDED: it may have been made), is asked for once more with the same id.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from famiglia.auth import TokenSigner
from famiglia.cli import add_column, add_plain_row
from famiglia.config import Settings
from famiglia.grpcutil.tls import dial
from famiglia.v1 import tournament_service_pb2 as pb
from famiglia.v1 import tournament_service_pb2_grpc as pb_grpc

console = Console()
NO_ANSWER = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
"""A call's statuses that say nothing of whether it was done."""
_STATUS = {pb.TOURNAMENT_RUNNING: "running", pb.TOURNAMENT_FINISHED: "finished",
           pb.TOURNAMENT_CANCELLED: "cancelled"}


@dataclass(frozen=True)
class Size:
    """One `--size` of the main job: how many matches and how much thinking."""

    matches_per_game: int
    ismcts: str
    deadline_seconds: float
    all_seat_counts: bool


SIZES = {
    # quick: about two minutes on 2 cores — small ISMCTS budgets, minimum seats,
    # and no new match starts after 60 s (the ones in play finish).
    "quick": Size(6, "ismcts?iterations=16&seconds=0.03", 60.0, False),
    "normal": Size(12, "ismcts?iterations=200&seconds=0.3", 900.0, True),
    "long": Size(60, "ismcts?iterations=1000&seconds=1.0", 0.0, True),
}


class TournamentClient:
    """A thin client of famiglia.v1.TournamentService. Creating and cancelling need an operator
    token: `secret` (the deployment's, `Settings.secret` by default) mints one per call."""

    def __init__(self, address: str, timeout: float = 30.0, *, secret: str | None = None) -> None:
        self.channel = dial(address)
        self.stub = pb_grpc.TournamentServiceStub(self.channel)
        self.timeout = timeout
        self._secret = secret

    def _as_operator(self) -> list[tuple[str, str]]:
        # The configured signer signs with a rollover's accepted secret too (famiglia.auth.tokens).
        signer = TokenSigner(self._secret) if self._secret is not None else Settings.from_env().signer()
        return [("authorization", f"Bearer {signer.operator_token('cli', ttl_s=300)}")]

    def wait_ready(self, timeout: float = 30.0) -> None:
        grpc.channel_ready_future(self.channel).result(timeout=timeout)

    def create(self, request: pb.CreateTournamentRequest,
               on_retry: Callable[[grpc.StatusCode], None] | None = None) -> pb.Tournament:
        """CreateTournament under a request id (a random one when the request has none), asked
        once more with the same id when no answer came (UNAVAILABLE, DEADLINE_EXCEEDED: it may
        have been made): the server answers with the tournament that id made, or makes it.
        Without an id a retry after a lost answer ran a second tournament beside the first.
        `on_retry` hears of the second ask."""
        if not request.request_id:
            asked = pb.CreateTournamentRequest()
            asked.CopyFrom(request)
            asked.request_id = uuid.uuid4().hex
            request = asked
        try:
            return self.stub.CreateTournament(request, timeout=self.timeout, metadata=self._as_operator())
        except grpc.RpcError as lost:
            if lost.code() not in NO_ANSWER:  # type: ignore[attr-defined]
                raise
            if on_retry is not None:
                on_retry(lost.code())  # type: ignore[attr-defined]
        return self.stub.CreateTournament(request, timeout=self.timeout, metadata=self._as_operator())

    def get(self, tournament_id: str, include_matches: bool = False) -> pb.Tournament:
        return self.stub.GetTournament(pb.GetTournamentRequest(tournament_id=tournament_id,
                                                               include_matches=include_matches),
                                       timeout=self.timeout)

    def list(self, limit: int = 20) -> list[pb.Tournament]:
        return list(self.stub.ListTournaments(pb.ListTournamentsRequest(limit=limit), timeout=self.timeout).tournaments)

    def cancel(self, tournament_id: str) -> pb.Tournament:
        return self.stub.CancelTournament(pb.CancelTournamentRequest(tournament_id=tournament_id),
                                          timeout=self.timeout, metadata=self._as_operator())

    def policies(self) -> pb.ListPoliciesResponse:
        return self.stub.ListPolicies(pb.ListPoliciesRequest(), timeout=self.timeout)

    def close(self) -> None:
        self.channel.close()


# -- rendering ---------------------------------------------------------------------------------
def short(entrant: str) -> str:
    return entrant.partition("?")[0]


def standings_table(t: pb.Tournament) -> Table:
    table = Table(title=f"Standings — {escape(t.name)} ({escape(t.tournament_id)}, {_STATUS.get(t.status, '?')})",
                  box=box.SIMPLE_HEAD, pad_edge=False,
                  caption="every seat an entrant held counts (wins and win% per seat)")
    for col, justify in (("game", "left"), ("entrant", "left"), ("seats", "right"), ("wins", "right"),
                         ("win%", "right"), ("rank", "right"), ("μ±σ", "right"), ("ordinal", "right")):
        add_column(table, col, justify=justify, no_wrap=True, min_width=len(col))
    last = ""
    for s in t.standings:
        add_plain_row(table, s.game_id if s.game_id != last else "", short(s.entrant), str(s.matches), str(s.wins),
                      f"{100 * s.wins / max(1, s.matches):.0f}", f"{s.mean_rank:.2f}",
                      f"{s.mu:.1f}±{s.sigma:.1f}", f"{s.ordinal:.1f}")
        last = s.game_id
    table.caption = "seats: seats played; rank: mean rank (1 = best); μ±σ: OpenSkill rating; ordinal: μ − 3σ, the sort key"
    return table


def replay_ids(t: pb.Tournament, per_game: int = 1) -> list[pb.MatchSummary]:
    picked: dict[str, list[pb.MatchSummary]] = {}
    for m in t.matches:
        rows = picked.setdefault(m.game_id, [])
        if len(rows) < per_game:
            rows.append(m)
    return [m for rows in picked.values() for m in rows]


def replay_table(matches: list[pb.MatchSummary]) -> Table:
    table = Table(title="Matches to replay", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("game", "match id", "seats (entrant: rank)", "commands"):
        add_column(table, col)
    for m in matches:
        seats = ", ".join(f"{short(e)}: {r}" for e, r in zip(m.entrants, m.ranks, strict=False))
        add_plain_row(table, m.game_id, m.match_id, seats, str(m.commands))
    return table


def follow(client: TournamentClient, tournament_id: str, out: Console, poll: float = 0.5,
           check: Callable[[], str | None] | None = None, check_every: float = 5.0) -> pb.Tournament:
    """Live progress until the tournament ends: matches done per game, moves per second.
    `check`, asked every `check_every` seconds, names what stops the tournament from ever ending
    (a process of the stack that died): following stops there, with that line."""
    t = client.get(tournament_id)
    checked_at = time.monotonic()
    last_moves, last_at = t.moves, time.monotonic()
    rate = 0.0
    with Progress(TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=out) as progress:
        bars = {g.game_id: progress.add_task(escape(g.game_id), total=max(1, g.planned), note="") for g in t.games}
        total = progress.add_task("all games", total=max(1, t.planned), note="")
        while True:
            for g in t.games:
                progress.update(bars[g.game_id], completed=g.finished, total=max(1, g.planned),
                                note=f"{g.started - g.finished} in play")
            now = time.monotonic()
            if now - last_at >= 1.0:
                rate = (t.moves - last_moves) / (now - last_at)
                last_moves, last_at = t.moves, now
            progress.update(total, completed=t.finished, total=max(1, t.planned),
                            note=f"{t.moves:,} moves, {rate:,.0f} moves/s")
            if t.status != pb.TOURNAMENT_RUNNING:
                # A deadline may leave planned matches unplayed: show the bars as they ended.
                for g in t.games:
                    progress.update(bars[g.game_id], total=max(1, g.started), completed=g.finished)
                progress.update(total, total=max(1, t.finished), completed=t.finished,
                                note=f"{t.moves:,} moves, {t.moves / max(1e-9, t.elapsed_seconds):,.0f} moves/s")
                break
            if check is not None and time.monotonic() - checked_at >= check_every:
                checked_at = time.monotonic()
                problem = check()
                if problem:
                    raise SystemExit(f"tournament {tournament_id} cannot finish: {problem}")
            time.sleep(poll)
            t = client.get(tournament_id)
    return client.get(tournament_id, include_matches=True)


# -- commands ----------------------------------------------------------------------------------
def _client(args: argparse.Namespace) -> TournamentClient:
    client = TournamentClient(getattr(args, "address", "") or Settings.from_env().bots_addr)
    client.wait_ready()
    return client


def cmd_run(args: argparse.Namespace) -> int:
    client = _client(args)
    games = [pb.TournamentGame(game_id=g, seat_counts=args.seats) for g in args.game]
    request = pb.CreateTournamentRequest(
        name=args.name, games=games, entrants=[e for e in args.entrants.split(",") if e],
        matches_per_game=args.matches, round_robin=args.round_robin, seed=args.seed,
        concurrency=args.concurrency, deadline_seconds=args.deadline)
    t = client.create(request, on_retry=lambda lost: console.print(f"[yellow]no answer[/] ({lost.name}); asking again"))
    console.print(f"tournament [bold]{escape(t.tournament_id)}[/]: {t.planned} matches")
    if args.no_wait:
        return 0
    t = follow(client, t.tournament_id, console)
    console.print(standings_table(t))
    console.print(replay_table(replay_ids(t)))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    client = _client(args)
    t = client.get(args.tournament_id, include_matches=args.matches)
    console.print(f"{t.finished}/{t.planned} matches, {t.moves:,} moves, {t.elapsed_seconds:.0f}s")
    console.print(standings_table(t))
    if args.matches:
        console.print(replay_table(list(t.matches)))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    table = Table(title="Tournaments")
    for col in ("id", "name", "status", "matches", "moves", "time"):
        add_column(table, col)
    for t in _client(args).list():
        add_plain_row(table, t.tournament_id, t.name, _STATUS.get(t.status, "?"), f"{t.finished}/{t.planned}",
                      f"{t.moves:,}", f"{t.elapsed_seconds:.0f}s")
    console.print(table)
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    t = _client(args).cancel(args.tournament_id)
    console.print(f"{escape(t.tournament_id)}: {_STATUS.get(t.status, '?')}")
    return 0


DAY_MS = 86_400_000
ENDS = ("finished", "cancelled")


def read_models_hold(stub: Any) -> Callable[[Any], bool]:
    """Whether the read models (QueryService GetTournamentStandings) hold an ended tournament
    (`services.bots.tournaments.Ended`): its end recorded and at least as many finished matches as
    its Redis record has results, so its standings there are whole. NOT_FOUND: no; out of reach:
    raised (the sweep stops, deleting nothing it could not check)."""
    from famiglia.v1 import query_service_pb2 as qpb

    def held(ended: Any) -> bool:
        try:
            reply = stub.GetTournamentStandings(qpb.GetTournamentStandingsRequest(tournament_id=ended.tournament_id),
                                                timeout=30)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:  # type: ignore[attr-defined]
                return False
            raise
        return reply.status in ENDS and reply.matches_finished >= ended.matches

    return held


def cmd_sweep(args: argparse.Namespace) -> int:
    """Delete the Redis records of the tournaments finished or cancelled more than
    --finished-days ago (services.bots.tournaments.TournamentRepo.sweep: nothing in play, the end
    recorded in the read models, and their standings there, checked with the QueryService)."""
    if not args.finished_days > 0:
        console.print("[red]--finished-days must be more than 0[/]")
        return 2
    import redis

    # The bots service's own store (as the bench uses the services' code), imported only here.
    from famiglia.v1 import query_service_pb2_grpc as qpb_grpc
    from services.bots.tournaments import TournamentRepo

    settings = Settings.from_env()
    cutoff_ms = int(time.time() * 1000) - int(args.finished_days * DAY_MS)
    client = redis.Redis.from_url(settings.redis_url)
    channel = dial(args.query_address or settings.projection_addr)
    done: list[tuple[Any, str]] = []

    def told(ended: Any, outcome: str) -> None:  # each line as it is known: a sweep stopped has said what went
        done.append((ended, outcome))
        when = time.strftime("%Y-%m-%d", time.gmtime(ended.finished_ms / 1000)) if ended.finished_ms else "-"
        console.print(f"{escape(ended.tournament_id)}: {ended.status or 'records gone'} {when}: {outcome}")

    verb = "would be deleted (dry run: none deleted)" if args.dry_run else "deleted"
    try:
        TournamentRepo(client).sweep(cutoff_ms, read_models_hold(qpb_grpc.QueryServiceStub(channel)),
                                     dry_run=args.dry_run, on_outcome=told)
    except (grpc.RpcError, redis.RedisError) as exc:
        why = (f"{exc.code().name}: {exc.details() or ''}" if isinstance(exc, grpc.RpcError)  # type: ignore[attr-defined]
               else repr(exc))
        console.print(f"[red]stopped: {escape(why)}[/]; {_swept(done)} {verb} before it (listed above); "
                      "run it again to go on")
        return 2
    finally:
        channel.close()
        client.close()
    gone = _swept(done)
    console.print(f"{gone} tournaments ended over {args.finished_days:g} days ago {verb}, {len(done) - gone} kept")
    return 0


def _swept(done: list[tuple[Any, str]]) -> int:
    return sum(outcome in ("swept", "sweepable", "gone") for _, outcome in done)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("tournament", help="bot tournaments: run, show, list, cancel, sweep",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default="", help="bots service (default: FAMIGLIA_BOTS_ADDR; grpcs://: TLS)")
    sub = parser.add_subparsers(dest="tournament_cmd", required=True)
    run = sub.add_parser("run", help="create a tournament, follow it, print the standings")
    run.add_argument("--game", action="append", default=[], help="a game id (repeat; default: every game)")
    run.add_argument("--seats", type=int, action="append", default=[], help="seat count(s) per match")
    run.add_argument("--entrants", default="random,heuristic,ismcts", help="comma-separated bot policies")
    run.add_argument("--matches", type=int, default=0, help="matches per game (default: 2 per entrant)")
    run.add_argument("--round-robin", action="store_true", help="every seat rotation of the entrants")
    run.add_argument("--concurrency", type=int, default=4, help="matches in play at once")
    run.add_argument("--deadline", type=float, default=0.0, help="start no match after this many seconds")
    run.add_argument("--seed", type=int, default=1)
    run.add_argument("--name", default="cli")
    run.add_argument("--no-wait", action="store_true", help="create it and return")
    run.set_defaults(func=cmd_run)
    show = sub.add_parser("show", help="progress and standings of one tournament")
    show.add_argument("tournament_id")
    show.add_argument("--matches", action="store_true", help="list the finished matches too")
    show.set_defaults(func=cmd_show)
    sub.add_parser("list", help="recent tournaments").set_defaults(func=cmd_list)
    cancel = sub.add_parser("cancel", help="start no further match of a tournament and cancel those in play")
    cancel.add_argument("tournament_id")
    cancel.set_defaults(func=cmd_cancel)
    sweep = sub.add_parser("sweep", help="delete the Redis records of tournaments ended --finished-days ago "
                                         "(their standings stay in the read models)")
    sweep.add_argument("--finished-days", type=float, required=True, help="days since a tournament ended")
    sweep.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    sweep.add_argument("--query-address", default="",
                       help="projection service (default: FAMIGLIA_PROJECTION_ADDR; grpcs://: TLS)")
    sweep.set_defaults(func=cmd_sweep)


# -- the main job ------------------------------------------------------------------------------
def main_job_request(size_name: str, games: list[pb.TournamentGame], seed: int, concurrency: int
                     ) -> pb.CreateTournamentRequest:
    size = SIZES[size_name]
    return pb.CreateTournamentRequest(
        name=f"make run ({size_name})", games=games, entrants=["random", "heuristic", size.ismcts],
        matches_per_game=size.matches_per_game, seed=seed, concurrency=concurrency,
        deadline_seconds=size.deadline_seconds, request_id="")


def _stack_problem() -> str | None:
    """What the tournament needs of the embedded stack that is no longer running: with the bots
    worker (or redis-server, the command or the bots service) gone, the matches in play never
    finish and `make run` followed them for ever."""
    from famiglia.localstack.stack import Stack, default_services

    stack = Stack()
    running = stack.running()
    needed = ["redis", *(spec.name for spec in default_services() if spec.name in ("command", "bots", "bots-worker"))]
    gone = [name for name in needed if name not in running]
    if not gone:
        return None
    logs = ", ".join(str(stack.var / "logs" / f"{name}.log") for name in gone if name != "redis")
    return f"{', '.join(gone)} of the embedded stack stopped" + (f" (see {logs})" if logs else "")


def run_main_job(args: argparse.Namespace, out: Console) -> int:
    """`make run`: every game the bots can play, random vs heuristic vs ismcts, on the
    already started embedded stack; live progress, then standings and replay ids."""
    started = time.monotonic()
    settings = Settings.from_env()
    client = TournamentClient(settings.bots_addr)
    client.wait_ready(timeout=60)
    size_name = getattr(args, "size", "quick") or "quick"
    size = SIZES[size_name]
    offered = client.policies()
    games = []
    from famiglia.client import GameClient

    game_client = GameClient(settings.command_addr)
    try:
        infos = {g.game_id: g for g in game_client.list_games()}
    finally:
        game_client.close()
    for game_id in offered.games:
        info = infos.get(game_id)
        if info is None:  # the command service does not play it (FAMIGLIA_GAMES)
            continue
        counts = (list(range(info.min_players, info.max_players + 1)) if size.all_seat_counts
                  else [info.min_players])
        games.append(pb.TournamentGame(game_id=game_id, seat_counts=counts))
    if not games:
        out.print("[red]no game is playable by both the command service and the bots[/]")
        return 1
    # Enough matches in play to keep every worker process busy while others wait on gRPC.
    concurrency = max(getattr(args, "workers", 4) or 4, 4 * (os.cpu_count() or 2))
    request = main_job_request(size_name, games, getattr(args, "seed", 1), concurrency)
    for old in client.list(limit=50):
        # An earlier `make run` stopped halfway would resume with the stack and share the workers.
        if old.status == pb.TOURNAMENT_RUNNING and old.name.startswith("make run"):
            client.cancel(old.tournament_id)
            out.print(f"[dim]cancelled the unfinished {escape(old.name)} {escape(old.tournament_id)}[/]")
    t = client.create(request, on_retry=lambda lost: out.print(f"[yellow]no answer[/] ({lost.name}); asking again"))
    out.rule(escape(f"bot tournament: {', '.join(g.game_id for g in games)} — "
                    f"{', '.join(short(e) for e in request.entrants)}"))
    t = follow(client, t.tournament_id, out, check=_stack_problem)
    # The final table is the read side's: what the projection made of the event streams.
    from famiglia.cli.projection import tournament_table

    # Its finished matches (`follow` reads them): `finished` also counts abandoned ones, which the
    # projection never sees end, so waiting for that many took the table's whole timeout.
    projected = tournament_table(t.tournament_id, expected_matches=len(t.matches), address=settings.projection_addr)
    out.print(projected if projected is not None else standings_table(t))
    picks = replay_ids(t)
    if picks:
        out.print(replay_table(picks))
        keep_up = getattr(args, "keep_up", False)
        out.print(f"Replay one{'' if keep_up else ' after `make up`'} with "
                  f"[bold].venv/bin/famiglia replay events {escape(picks[0].match_id)}[/] "
                  f"or export it with [bold].venv/bin/famiglia replay export {escape(picks[0].match_id)} -o match.json[/].",
                  soft_wrap=True)
    out.print(f"{t.finished} matches, {t.moves:,} moves in {time.monotonic() - started:.0f}s "
              f"(tournament {escape(t.tournament_id)}; `.venv/bin/famiglia tournament show {escape(t.tournament_id)}`).",
              soft_wrap=True)
    client.close()
    return 0
