"""`famiglia matchmake ...` — a mobile client's path from the command line.

    famiglia matchmake GAME [--seats 3,4] [--option key=value ...] [--name NAME]
                            [--token PLAYER_TOKEN] [--party PLAYER_ID ...] [--timeout S]
    famiglia matchmake --invites --token PLAYER_TOKEN
    famiglia matchmake --accept TICKET_ID --token PLAYER_TOKEN [--timeout S]
    famiglia matchmake --decline TICKET_ID --token PLAYER_TOKEN

Registers a guest (unless --token names a player), queues a ticket, follows it
until a match is found and prints the match id, the seat and its seat token: the
command service accepts that token for that seat (`famiglia play` style clients
send it as `authorization: Bearer <token>`). Ctrl-C (even while the ticket is being made, or
an invite accepted) or --timeout cancels the ticket; once a match is being made with it the
cancel is refused (`ticket_matched`) and the seat is the player's all the same, so it follows
the ticket on to that seat and prints its token. A ticket's creation left without an answer
or an acceptance (UNAVAILABLE, DEADLINE_EXCEEDED: either may have been done) is asked for once
more (the ticket with the same request id).
Exit status: 0 matched (the token printed), 1 the ticket ended without a match, 2 a request
refused (here or by the server) or a server gone (a cancel that failed so too: the ticket is
still open), 130 a second Ctrl-C while following on. --invites and --decline exit 0 once answered.

With --party the ticket waits until every invited player accepts: each of them runs
`--invites` to see it and `--accept TICKET_ID` to join (then follows it like the
creator) or `--decline TICKET_ID` to refuse it for the whole party.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable

import grpc
from rich.console import Console
from rich.markup import escape

from famiglia.config import Settings
from famiglia.engine.registry import default_registry
from famiglia.grpcutil.errors import error_code
from famiglia.grpcutil.tls import dial
from famiglia.matchmaking import InvalidRequest, normalize_request
from famiglia.matchmaking.shapes import games_of
from famiglia.v1 import matchmaking_service_pb2 as pb
from famiglia.v1 import matchmaking_service_pb2_grpc as pb_grpc

console = Console()
STATE = {pb.TICKET_SEARCHING: "searching", pb.TICKET_MATCHED: "matched", pb.TICKET_CANCELLED: "cancelled",
         pb.TICKET_EXPIRED: "expired", pb.TICKET_FAILED: "failed", pb.TICKET_PENDING_PARTY: "waiting for the party"}
WATCH_RETRIES = 8
"""Cut watches in a row opened again (pauses doubling from half a second up to WATCH_PAUSE_MAX_S,
some 25 s in all) before the server is taken for gone and its status reported."""
WATCH_PAUSE_MAX_S = 5.0
NO_ANSWER = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
"""A call's statuses that say nothing of whether it was done."""
ENDED = frozenset({"ticket_cancelled", "ticket_expired", "ticket_failed"})
"""The codes of an answer that came after the ticket ended."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "matchmake", help="find a match through the matchmaking service",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("game", nargs="?", default="",
                        help="game id (goodcritters, nothing_personal, nostra_city, grifters)")
    parser.add_argument("--seats", default="", help="acceptable table sizes, e.g. 3,4 (default: any)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="a match option")
    parser.add_argument("--name", default="CLI guest", help="display name of the new guest")
    parser.add_argument("--token", default="", help="queue as this player (a player token)")
    parser.add_argument("--party", action="append", default=[], metavar="PLAYER_ID",
                        help="another player who must sit at the same table (they must accept the invite)")
    answer = parser.add_mutually_exclusive_group()
    answer.add_argument("--invites", action="store_true", help="list the party invites waiting for --token's player")
    answer.add_argument("--accept", default="", metavar="TICKET_ID", help="join a party ticket and follow it")
    answer.add_argument("--decline", default="", metavar="TICKET_ID", help="refuse a party ticket")
    parser.add_argument("--timeout", type=float, default=0.0, help="cancel after this many seconds (0: never)")
    parser.add_argument("--address", default="", help="matchmaking service (default: FAMIGLIA_MATCHMAKING_ADDR; grpcs://: TLS)")
    parser.set_defaults(func=cmd_matchmake)


def cmd_matchmake(args: argparse.Namespace) -> int:
    address = args.address or Settings.from_env().matchmaking_addr
    channel = dial(address)
    players, tickets = pb_grpc.PlayerServiceStub(channel), pb_grpc.MatchmakingServiceStub(channel)
    try:
        if args.invites or args.accept or args.decline:
            return _answer(tickets, args)
        if not args.game:
            console.print("[red]name a game[/] (or --invites, --accept, --decline)")
            return 2
        try:  # read what we can before anything is registered on the server
            options = dict(o.split("=", 1) for o in args.option)
            seats = [int(s) for s in args.seats.split(",") if s.strip()]
        except ValueError:
            console.print("[red]bad request[/]: options are KEY=VALUE, seats a comma-separated list of numbers")
            return 2
        refusal = _refusal(args.game, seats, options)
        if refusal:
            console.print(f"[red]bad request[/]: {escape(refusal)}")
            return 2
        token = args.token
        if not token:
            guest = players.RegisterGuest(pb.RegisterGuestRequest(display_name=args.name), timeout=10)
            token = guest.player_token
            console.print(f"guest [bold]{escape(guest.player_id)}[/] ({escape(args.name)}); player token:\n{escape(token)}",
                          soft_wrap=True)
        auth = [("authorization", f"Bearer {token}")]
        request = pb.CreateTicketRequest(game_id=args.game, seat_counts=seats, options=options, party=args.party,
                                         request_id=uuid.uuid4().hex)
        try:
            created = tickets.CreateTicket(request, metadata=auth, timeout=10)
        except KeyboardInterrupt:
            # Ctrl-C while the ticket was being made: it may exist, and left alone it would be
            # matched to a seat nobody holds. The same request id answers with it (or makes it,
            # if the first never arrived), and it is cancelled as any ticket Ctrl-C ends.
            created = tickets.CreateTicket(request, metadata=auth, timeout=10)
            console.print(f"ticket [bold]{escape(created.ticket_id)}[/] (interrupted while it was made)")
            return _report(_cancel(tickets, created.ticket_id, auth, time.sleep))
        except grpc.RpcError as lost:
            if lost.code() not in NO_ANSWER:  # type: ignore[attr-defined]
                raise
            # No answer is not a no (README, "Playing over gRPC"): the ticket may be made, and left
            # unfollowed it would be matched to a seat nobody holds. Asked once more with the same
            # request id, which answers with it (or makes it); failing again, its status (2).
            console.print(f"[yellow]no answer[/] ({lost.code().name}); asking again")  # type: ignore[attr-defined]
            created = tickets.CreateTicket(request, metadata=auth, timeout=10)
        console.print(f"ticket [bold]{escape(created.ticket_id)}[/]")
        return _follow(tickets, created.ticket_id, auth, args.timeout or None)
    except grpc.RpcError as exc:
        console.print(f"[red]{exc.code().name}[/]: {escape(exc.details() or '')}")  # type: ignore[attr-defined]
        return 2
    finally:
        channel.close()


def _refusal(game_id: str, seats: list[int], options: dict[str, str]) -> str | None:
    """What the server would refuse in the ticket, asked of the games this client ships (the
    server's own) by the server's own rule (`normalize_request`), before a guest is registered
    for nothing; the server still judges the ticket."""
    shapes = games_of(default_registry())
    shape = shapes.get(game_id)
    if shape is None:
        return f"no game {game_id!r}; the games are {', '.join(sorted(shapes))}"
    try:
        normalize_request(shape, seats, options, 1)
    except InvalidRequest as exc:
        return f"{exc.message} ({exc.code})"
    return None


def _answer(tickets: pb_grpc.MatchmakingServiceStub, args: argparse.Namespace) -> int:
    """An invitee's side of a party ticket."""
    if not args.token:
        console.print("[red]--token is needed[/]: invites belong to a player")
        return 2
    auth = [("authorization", f"Bearer {args.token}")]
    if args.invites:
        listed = tickets.ListInvites(pb.ListInvitesRequest(game_id=args.game), metadata=auth, timeout=10)
        for invite in listed.invites:
            console.print(f"[bold]{escape(invite.ticket_id)}[/] from {escape(invite.party[0])}: {escape(invite.game_id)} "
                          f"with {escape(', '.join(invite.party[1:]))}; answer within {invite.answer_within_seconds:.0f}s")
        if not listed.invites:
            console.print("no invites")
        return 0
    if args.decline:
        update = tickets.DeclinePartyInvite(pb.DeclinePartyInviteRequest(ticket_id=args.decline), metadata=auth,
                                            timeout=10)
        console.print(f"ticket {STATE.get(update.state, '?')}: {escape(update.reason)}")
        return 0
    accept = pb.AcceptPartyInviteRequest(ticket_id=args.accept)
    try:
        tickets.AcceptPartyInvite(accept, metadata=auth, timeout=10)
    except KeyboardInterrupt:
        return _take_back(tickets, args.accept, auth)
    except grpc.RpcError as lost:
        if lost.code() not in NO_ANSWER:  # type: ignore[attr-defined]
            raise
        # The acceptance may have arrived (the last one queues the ticket, to be matched to a seat
        # nobody holds): asked again, which answers for a ticket joined already as for a first.
        console.print(f"[yellow]no answer[/] ({lost.code().name}); asking again")  # type: ignore[attr-defined]
        tickets.AcceptPartyInvite(accept, metadata=auth, timeout=10)
    console.print(f"joined ticket [bold]{escape(args.accept)}[/]")
    return _follow(tickets, args.accept, auth, args.timeout or None)


def _take_back(tickets: pb_grpc.MatchmakingServiceStub, ticket_id: str, auth: list[tuple[str, str]]) -> int:
    """Ctrl-C while an acceptance was out: it may have arrived, and the last one queues the ticket,
    to be matched to a seat nobody holds. Declined, as Ctrl-C cancels a followed ticket; the
    ticket queued already (the acceptance the last), it is cancelled."""
    try:
        update = tickets.DeclinePartyInvite(pb.DeclinePartyInviteRequest(ticket_id=ticket_id), metadata=auth,
                                            timeout=10)
    except grpc.RpcError as refused:
        code = error_code(refused)  # type: ignore[arg-type]
        if code == "invite_answered":
            return _report(_cancel(tickets, ticket_id, auth, time.sleep))
        if code in ENDED:  # over already (cancelled, expired, declined by another): its end
            return _report(tickets.GetTicket(pb.GetTicketRequest(ticket_id=ticket_id), metadata=auth, timeout=10))
        raise
    return _report(update)


def _follow(tickets: pb_grpc.MatchmakingServiceStub, ticket_id: str, auth: list[tuple[str, str]],
            timeout: float | None, *, pause: Callable[[float], None] = time.sleep) -> int:
    try:
        last = _watch(tickets, ticket_id, auth, timeout, pause)
    except (KeyboardInterrupt, grpc.RpcError) as exc:
        if isinstance(exc, grpc.RpcError) and exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED:  # type: ignore[attr-defined]
            raise
        last = _cancel(tickets, ticket_id, auth, pause)
    return _report(last)


def _cancel(tickets: pb_grpc.MatchmakingServiceStub, ticket_id: str, auth: list[tuple[str, str]],
            pause: Callable[[float], None]) -> pb.TicketUpdate | None:
    """Cancel the ticket (Ctrl-C, --timeout): its last state, or the one it was matched to when
    the cancel came too late; raises the cancel's failure while the ticket is still open."""
    try:
        return tickets.CancelTicket(pb.CancelTicketRequest(ticket_id=ticket_id), metadata=auth, timeout=10)
    except grpc.RpcError as refused:
        if error_code(refused) == "ticket_matched":  # type: ignore[arg-type]
            # Too late: a table is being made with this ticket (or was), and its seat is this
            # player's whether or not anyone plays it. Leaving now would strand the seat.
            console.print("too late to cancel: a match is being made with this ticket; following it")
            return _watch(tickets, ticket_id, auth, None, pause)
        last = tickets.GetTicket(pb.GetTicketRequest(ticket_id=ticket_id), metadata=auth, timeout=10)
        if last.state in (pb.TICKET_SEARCHING, pb.TICKET_PENDING_PARTY):
            # Not cancelled (the server or its Redis away): not a ticket that ended (1), but
            # the cancel's own status, and the ticket's id to cancel it by.
            console.print(f"[red]could not cancel[/]: ticket [bold]{escape(ticket_id)}[/] is still open")
            raise refused from None
        return last


def _report(last: pb.TicketUpdate | None) -> int:
    """The ticket's end, printed, and the exit status it makes: 0 matched, 1 not."""
    if last is None:
        return 1
    if last.state != pb.TICKET_MATCHED:
        console.print(f"ticket {STATE.get(last.state, '?')}" + (f": {escape(last.reason)}" if last.reason else ""))
        return 1
    console.print(f"[green]matched[/]: match [bold]{escape(last.match_id)}[/], seat {last.seat} of {last.seats}"
                  f" ({last.bots} bot{'s' if last.bots != 1 else ''})\nseat token:\n{escape(last.seat_token)}",
                  soft_wrap=True)
    return 0


def _watch(tickets: pb_grpc.MatchmakingServiceStub, ticket_id: str, auth: list[tuple[str, str]],
           timeout: float | None, pause: Callable[[float], None]) -> pb.TicketUpdate | None:
    """The ticket's updates, printed, until the stream ends (after the ticket's last state): its last.
    A stream cut by the server going away (UNAVAILABLE: a replica stopping, Redis restarting) is
    opened again, as docs/matchmaking.md tells clients: the ticket lives in Redis, not in the
    stream, and left unwatched it would be matched to a seat nobody holds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    last, cuts = None, 0
    while True:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            for update in tickets.WatchTicket(pb.WatchTicketRequest(ticket_id=ticket_id), metadata=auth, timeout=left):
                cuts = 0
                if update.state == pb.TICKET_PENDING_PARTY and (last is None or last.awaiting != update.awaiting):
                    console.print(f"waiting for {escape(', '.join(update.awaiting))} to accept "
                                  f"({update.answer_within_seconds:.0f}s left)")
                last = update
                if update.state == pb.TICKET_SEARCHING:
                    console.print(f"searching… waited {update.waited_seconds:.0f}s, "
                                  f"about {update.estimated_wait_seconds:.0f}s to go")
            return last
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNAVAILABLE or cuts >= WATCH_RETRIES:  # type: ignore[attr-defined]
                raise
            cuts += 1
            console.print(f"[yellow]watch cut[/] ({escape(exc.details() or 'UNAVAILABLE')}); "  # type: ignore[attr-defined]
                          "watching the ticket again")
            wait = min(WATCH_PAUSE_MAX_S, 0.5 * 2 ** (cuts - 1))
            pause(wait if deadline is None else min(wait, max(0.0, deadline - time.monotonic())))  # --timeout kept
