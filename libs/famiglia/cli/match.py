"""`famiglia match ...` — operator actions on one match of the command service.

    famiglia match cancel MATCH_ID --reason TEXT [--request-id ID]   end it with no result
    famiglia match allow-rematch MATCH_ID                            its table may ask for a rematch
    famiglia match sweep --idle-days N [--dry-run]                   cancel the live matches idle N days
    famiglia match reindex-players [--dry-run] [--cursor N]          put live matches in their players' lists

The operator token is minted from the deployment's secret (FAMIGLIA_SECRET, or the embedded
stack's `var/secret`), as `famiglia tournament` does, and signed with FAMIGLIA_SECRET_ACCEPTED
too when it is set (a secret rollover: each replica reads it by its own secret alone).

`sweep` finds the matches that never end (their people walked away from a game without clocks,
and nobody cancelled them: their stream, command records and the bots' tracking stay for good)
in the read models (QueryService ListMatches, live ones), not in the event store, which has no
index of the matches still running (finding them there means reading every key). Each match
whose last projected event is older than N days is cancelled at the version the read models
show (`expected_version`): a match that moved since, which the projection has not caught up
with, is refused `stale_version` and left alone. The request id is `sweep:<match id>`, so a
sweep run again (after a lost answer, or before the projection caught up) is answered as the
first cancel, not made twice.

`reindex-players` is a backfill, run once: ListMyTurns reads a per-player index of live matches
that the command service writes when a match naming players is created, so a match created
before the index existed is in no player's list. It walks every match in the event store
(FAMIGLIA_REDIS_URL, FAMIGLIA_PARTITIONS: in this process, not through the command service)
and writes the people of each live one with the service's own write (`ZADD NX`: an entry
there is kept, so a second run changes nothing); finished, cancelled and archived matches are
left out, and so are imported ones (they name no player) and a player who left a match for good. It prints where it is after each page
of keys: `--cursor N` resumes an interrupted run there (on the same Redis). `--dry-run` counts,
writes nothing. Exit 1 when a write was lost (Redis away for it): run it again.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import grpc
from rich.console import Console
from rich.markup import escape

from famiglia.client import GameClient
from famiglia.config import Settings
from famiglia.grpcutil.errors import error_code
from famiglia.grpcutil.tls import dial

console = Console()


def cmd_cancel(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    # A request id of its own, printed: running the command again with it after a lost answer
    # is answered as the first call was, not refused as a cancel of a match already over.
    request_id = args.request_id or uuid.uuid4().hex
    token = settings.signer().operator_token("cli", ttl_s=300)
    client = GameClient(args.address or settings.command_addr)
    try:
        done = client.cancel_match(args.match_id, args.reason, token=token, request_id=request_id)
    finally:
        client.close()
    again = " (already, by this request id)" if done.duplicate else ""
    console.print(f"{escape(args.match_id)}: cancelled at version {done.version}{again}; request id {escape(request_id)}")
    return 0


def cmd_allow_rematch(args: argparse.Namespace) -> int:
    """A finished match whose bots think past the public budget (its creation needed an operator)
    has its table's rematch asks refused `operator_only` until an operator allows it."""
    settings = Settings.from_env()
    token = settings.signer().operator_token("cli", ttl_s=300)
    client = GameClient(args.address or settings.command_addr)
    try:
        answer = client.allow_rematch(args.match_id, token=token)
    finally:
        client.close()
    if answer.match_id:
        console.print(f"{escape(args.match_id)}: its rematch is {escape(answer.match_id)}", highlight=False)
    elif answer.waiting_for:
        waiting = ", ".join(str(s) for s in answer.waiting_for)
        console.print(f"{escape(args.match_id)}: rematch allowed; seat(s) {waiting} to ask", highlight=False)
    else:  # every person asked and the creation is not through yet (the command service's sweep makes it)
        console.print(f"{escape(args.match_id)}: rematch allowed; every person at its table asked, "
                      "the rematch is being made", highlight=False)
    return 0


DAY_MS = 86_400_000
SWEEP_PAGE = 500


@dataclass(frozen=True)
class IdleMatch:
    match_id: str
    version: int
    """The last event the read models projected: the cancel's expected version."""
    last_event_ms: int


def idle_matches(live: Iterable[IdleMatch], *, now_ms: int, idle_days: float) -> list[IdleMatch]:
    """The live matches whose last event is more than `idle_days` before `now_ms`, oldest first."""
    cutoff = now_ms - int(idle_days * DAY_MS)
    return sorted((m for m in live if m.last_event_ms < cutoff), key=lambda m: (m.last_event_ms, m.match_id))


def sweep_request_id(match_id: str) -> str:
    """One per match, so a sweep run again is answered as the first cancel was."""
    return f"sweep:{match_id}"


def _live_matches(address: str) -> Iterator[IdleMatch]:
    """Every live match the read models hold, a page at a time (QueryService ListMatches)."""
    from famiglia.v1 import query_service_pb2 as pb
    from famiglia.v1 import query_service_pb2_grpc as pb_grpc

    channel = dial(address)
    try:
        stub = pb_grpc.QueryServiceStub(channel)
        token = ""
        while True:
            reply = stub.ListMatches(pb.ListMatchesRequest(status=pb.MATCH_STATUS_LIVE, page_size=SWEEP_PAGE,
                                                           page_token=token), timeout=30)
            for m in reply.matches:
                yield IdleMatch(m.match_id, m.version, m.last_event_at.ToMilliseconds())
            token = reply.next_page_token
            if not token:
                return
    finally:
        channel.close()


def cmd_sweep(args: argparse.Namespace) -> int:
    if not args.idle_days > 0:
        console.print("[red]--idle-days must be more than 0[/]")
        return 2
    settings = Settings.from_env()
    try:
        idle = idle_matches(_live_matches(args.query_address or settings.projection_addr),
                            now_ms=int(time.time() * 1000), idle_days=args.idle_days)
    except grpc.RpcError as exc:
        console.print(f"[red]{exc.code().name}[/]: {escape(exc.details() or '')}")  # type: ignore[attr-defined]
        return 2
    if args.dry_run:
        for m in idle:
            console.print(f"{escape(m.match_id)}: idle since {_when(m.last_event_ms)} (version {m.version})")
        console.print(f"{len(idle)} live matches idle for {args.idle_days:g} days (dry run: none cancelled)")
        return 0
    reason = f"swept: no event for {args.idle_days:g} days"
    client = GameClient(args.address or settings.command_addr)
    cancelled = left = 0
    try:
        for m in idle:
            token = settings.signer().operator_token("sweep", ttl_s=300)  # a sweep may be long
            try:
                done = client.cancel_match(m.match_id, reason, token=token, request_id=sweep_request_id(m.match_id),
                                           expected_version=m.version)
            except grpc.RpcError as exc:
                if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise
                left += 1  # over since (match_over), or moved since (stale_version): not idle
                console.print(f"{escape(m.match_id)}: left: {exc.code().name}: {escape(error_code(exc) or '')}")
                continue
            cancelled += 1
            again = " (already, by an earlier sweep)" if done.duplicate else ""
            console.print(f"{escape(m.match_id)}: cancelled at version {done.version}{again}")
    except grpc.RpcError as exc:
        console.print(f"[red]{exc.code().name}[/]: {escape(exc.details() or '')}")  # type: ignore[attr-defined]
        return 2
    finally:
        client.close()
    console.print(f"{cancelled} idle matches cancelled, {left} left (over or moved since)")
    return 0


def cmd_reindex_players(args: argparse.Namespace) -> int:
    from services.command.bootstrap import bootstrap  # the command service's own fold and index write
    from services.command.player_index import Reindexed, reindex_players

    if args.cursor < 0:
        console.print("[red]--cursor is a SCAN cursor a run printed, 0 or more[/]")
        return 2
    app = bootstrap(settings=Settings.from_env())
    resume = args.cursor

    def page(done: Reindexed) -> None:
        nonlocal resume
        resume = done.cursor
        if done.cursor:
            console.print(f"{done.looked_at} matches looked at, {done.indexed} indexed; "
                          f"to resume from here: --cursor {done.cursor}")

    try:
        done = reindex_players(app, dry_run=args.dry_run, cursor=args.cursor, on_page=page)
    except KeyboardInterrupt:  # Ctrl-C: where to resume too (docs/operations.md), then "interrupted", 130
        console.print(f"[yellow]stopped[/]; resume with --cursor {resume}")
        raise
    except Exception as exc:  # noqa: BLE001 - Redis away or the like: say where to resume
        console.print(f"[red]stopped: {escape(repr(exc))}[/]; resume with --cursor {resume}")
        return 2
    finally:
        app.close()
    verb = "would be put" if args.dry_run else "put"
    console.print(f"{done.looked_at} matches looked at: {done.indexed} live ones {verb} in their players' "
                  f"lists ({done.entries} entries; one there already is kept), {done.over} over, "
                  f"{done.nobody} naming no player, {done.unreadable} unreadable here"
                  + (f", {done.unwritten} NOT written (Redis away: run it again)" if done.unwritten else "")
                  + (" (dry run: nothing written)" if args.dry_run else ""))
    return 1 if done.unwritten else 0


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + " UTC"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("match", help="operator actions on matches: cancel, allow-rematch, sweep, "
                                                 "reindex-players",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default="", help="command service (default: FAMIGLIA_COMMAND_ADDR; grpcs://: TLS)")
    sub = parser.add_subparsers(dest="match_cmd", required=True)
    cancel = sub.add_parser("cancel", help="end a match with no result (stuck, orphaned, stopped)")
    cancel.add_argument("match_id")
    cancel.add_argument("--reason", required=True, help="why: stored in the match and shown to every seat")
    cancel.add_argument("--request-id", default="", help="idempotency key, at most 120 characters (default: a new one, printed)")
    cancel.set_defaults(func=cmd_cancel)
    allow = sub.add_parser("allow-rematch", help="let the table of a match whose bots think past the public "
                                                 "budget ask for a rematch (AskRematch, operator)")
    allow.add_argument("match_id")
    allow.set_defaults(func=cmd_allow_rematch)
    sweep = sub.add_parser("sweep", help="cancel every live match with no event for --idle-days (read models)")
    sweep.add_argument("--idle-days", type=float, required=True, help="days since a match's last event")
    sweep.add_argument("--dry-run", action="store_true", help="list the idle matches, cancel none")
    sweep.add_argument("--query-address", default="",
                       help="projection service (default: FAMIGLIA_PROJECTION_ADDR; grpcs://: TLS)")
    sweep.set_defaults(func=cmd_sweep)
    reindex = sub.add_parser("reindex-players",
                             help="backfill ListMyTurns' index: every live match in the event store in its "
                                  "players' lists (idempotent; Redis, not the command service)")
    reindex.add_argument("--dry-run", action="store_true", help="count the live matches to index, write nothing")
    reindex.add_argument("--cursor", type=int, default=0,
                         help="resume an interrupted run where it printed it was (default 0: the start)")
    reindex.set_defaults(func=cmd_reindex_players)
