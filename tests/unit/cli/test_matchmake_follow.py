"""`famiglia matchmake` following its ticket: a cancel that comes too late and a watch that is cut
must not leave a seat behind that nobody holds (docs/matchmaking.md, "Cancelling", "Watch it")."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from famiglia.cli import matchmaking as cli
from famiglia.v1 import matchmaking_service_pb2 as pb

TICKET = "grifters.0123456789abcdef0123"
AUTH = [("authorization", "Bearer t")]


class Refused(grpc.RpcError):
    """A call's failure as a client sees it: a status and famiglia's code in the trailers."""

    def __init__(self, status: grpc.StatusCode, code: str = "", details: str = "") -> None:
        super().__init__(status.name)
        self._status, self._code, self._details = status, code, details

    def code(self) -> grpc.StatusCode:
        return self._status

    def details(self) -> str:
        return self._details or self._code or self._status.name

    def trailing_metadata(self) -> list[tuple[str, str]]:
        return [("famiglia-code", self._code)] if self._code else []


SEARCHING = pb.TicketUpdate(ticket_id=TICKET, state=pb.TICKET_SEARCHING, seat=-1)
MATCHED = pb.TicketUpdate(ticket_id=TICKET, state=pb.TICKET_MATCHED, match_id="m1", seat=2, seats=4,
                          seat_token="seat-token-of-mine")


class Tickets:
    """MatchmakingService as the CLI calls it: each WatchTicket plays the next script of updates,
    ending with an exception or not."""

    def __init__(self, *watches: list[pb.TicketUpdate | BaseException], cancel: Exception | None = None) -> None:
        self.watches = list(watches)
        self.cancel = cancel
        self.calls: list[str] = []

    def WatchTicket(self, request: pb.WatchTicketRequest, **_: object) -> Iterator[pb.TicketUpdate]:
        self.calls.append("watch")
        for item in self.watches.pop(0):
            if isinstance(item, BaseException):
                raise item
            yield item

    def CancelTicket(self, request: pb.CancelTicketRequest, **_: object) -> pb.TicketUpdate:
        self.calls.append("cancel")
        if self.cancel is not None:
            raise self.cancel
        return pb.TicketUpdate(ticket_id=TICKET, state=pb.TICKET_CANCELLED, reason="cancelled by me")

    def GetTicket(self, request: pb.GetTicketRequest, **_: object) -> pb.TicketUpdate:
        self.calls.append("get")
        return SEARCHING  # a claimed ticket reads as searching until its match is made


def test_a_cancel_refused_because_the_match_is_being_made_follows_the_ticket_to_its_seat(
        capsys: pytest.CaptureFixture[str]) -> None:
    tickets = Tickets([SEARCHING, Refused(grpc.StatusCode.DEADLINE_EXCEEDED)], [SEARCHING, MATCHED],
                      cancel=Refused(grpc.StatusCode.FAILED_PRECONDITION, "ticket_matched"))
    assert cli._follow(tickets, TICKET, AUTH, 1.0) == 0  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert "seat-token-of-mine" in out and "match m1" in out
    assert tickets.calls == ["watch", "cancel", "watch"]


def test_a_watch_cut_by_a_server_going_away_is_opened_again(capsys: pytest.CaptureFixture[str]) -> None:
    pauses: list[float] = []
    tickets = Tickets([SEARCHING, Refused(grpc.StatusCode.UNAVAILABLE, "server_stopping")], [SEARCHING, MATCHED])
    assert cli._follow(tickets, TICKET, AUTH, None, pause=pauses.append) == 0  # type: ignore[arg-type]
    assert "seat-token-of-mine" in capsys.readouterr().out
    assert tickets.calls == ["watch", "watch"] and len(pauses) == 1


def test_a_server_that_stays_away_ends_the_follow_with_its_status() -> None:
    away = Refused(grpc.StatusCode.UNAVAILABLE)
    tickets = Tickets(*([away] for _ in range(cli.WATCH_RETRIES + 1)))
    with pytest.raises(grpc.RpcError):
        cli._follow(tickets, TICKET, AUTH, None, pause=lambda _s: None)  # type: ignore[arg-type]
    assert tickets.calls == ["watch"] * (cli.WATCH_RETRIES + 1)


def test_a_timeout_still_cancels_a_searching_ticket(capsys: pytest.CaptureFixture[str]) -> None:
    tickets = Tickets([SEARCHING, Refused(grpc.StatusCode.DEADLINE_EXCEEDED)])
    assert cli._follow(tickets, TICKET, AUTH, 1.0) == 1  # type: ignore[arg-type]
    assert "ticket cancelled" in capsys.readouterr().out and tickets.calls == ["watch", "cancel"]


def test_a_second_ctrl_c_while_following_on_leaves_with_the_interrupt() -> None:
    """Documented: 130 (the CLI's KeyboardInterrupt), not a second cancel nor a status of 1."""
    tickets = Tickets([SEARCHING, KeyboardInterrupt()], [SEARCHING, KeyboardInterrupt()],
                      cancel=Refused(grpc.StatusCode.FAILED_PRECONDITION, "ticket_matched"))
    with pytest.raises(KeyboardInterrupt):
        cli._follow(tickets, TICKET, AUTH, None, pause=lambda _s: None)  # type: ignore[arg-type]
    assert tickets.calls == ["watch", "cancel", "watch"]


def test_the_pauses_between_cut_watches_keep_within_the_timeout() -> None:
    """The pauses doubled up to 5 s whatever was left of --timeout: a ticket was cancelled up to
    5 s after its time."""
    pauses: list[float] = []
    cut = Refused(grpc.StatusCode.UNAVAILABLE, "server_stopping")
    tickets = Tickets([cut], [cut], [cut], [cut], [SEARCHING, MATCHED])
    assert cli._follow(tickets, TICKET, AUTH, 1.0, pause=pauses.append) == 0  # type: ignore[arg-type]
    assert len(pauses) == 4 and max(pauses) <= 1.0


def test_a_cancel_that_could_not_be_made_does_not_report_the_ticket_ended(capsys: pytest.CaptureFixture[str]) -> None:
    """A cancel that failed (the server away, Redis away) left the ticket searching, and the CLI
    printed `ticket searching` and exited 1, which says the ticket ended without a match: it is
    the server's status (2), the ticket still open."""
    tickets = Tickets([SEARCHING, Refused(grpc.StatusCode.DEADLINE_EXCEEDED)],
                      cancel=Refused(grpc.StatusCode.UNAVAILABLE, "store_unavailable"))
    with pytest.raises(grpc.RpcError) as refused:
        cli._follow(tickets, TICKET, AUTH, 1.0)  # type: ignore[arg-type]
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    assert "still open" in capsys.readouterr().out
    assert tickets.calls == ["watch", "cancel", "get"]


def test_a_cancel_refused_because_the_ticket_ended_reports_its_end(capsys: pytest.CaptureFixture[str]) -> None:
    tickets = Tickets([SEARCHING, Refused(grpc.StatusCode.DEADLINE_EXCEEDED)],
                      cancel=Refused(grpc.StatusCode.FAILED_PRECONDITION, "ticket_expired"))
    tickets.GetTicket = lambda *_a, **_k: pb.TicketUpdate(  # type: ignore[method-assign]
        ticket_id=TICKET, state=pb.TICKET_EXPIRED, reason="ticket lifetime reached")
    assert cli._follow(tickets, TICKET, AUTH, 1.0) == 1  # type: ignore[arg-type]
    assert "ticket expired" in capsys.readouterr().out


class Made(Tickets):
    """A server whose CreateTicket makes the ticket, its answer cut short by Ctrl-C the first time."""

    def __init__(self) -> None:
        super().__init__()
        self.request_ids: list[str] = []

    def CreateTicket(self, request: pb.CreateTicketRequest, **_: object) -> pb.CreateTicketResponse:
        self.calls.append("create")
        self.request_ids.append(request.request_id)
        if len(self.request_ids) == 1:
            raise KeyboardInterrupt  # the ticket is made; the answer never read
        return pb.CreateTicketResponse(ticket_id=TICKET, duplicate=True, ticket=SEARCHING)


class Guests:
    def RegisterGuest(self, request: pb.RegisterGuestRequest, **_: object) -> pb.RegisterGuestResponse:
        return pb.RegisterGuestResponse(player_id="g1", player_token="t")


def test_ctrl_c_while_the_ticket_is_being_made_cancels_it(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C during CreateTicket left the command with 130 and the ticket, made all the same,
    searching with nobody to follow it: matched to a seat nobody holds. The request id sent again
    answers with that ticket, which is cancelled as any Ctrl-C cancels it (exit 1)."""
    made = Made()
    monkeypatch.setattr(cli, "dial", lambda _address: type("Channel", (), {"close": lambda self: None})())
    monkeypatch.setattr(cli.pb_grpc, "PlayerServiceStub", lambda _channel: Guests())
    monkeypatch.setattr(cli.pb_grpc, "MatchmakingServiceStub", lambda _channel: made)
    args = cli.argparse.Namespace(address="localhost:1", invites=False, accept="", decline="", game="grifters",
                                  option=[], seats="", token="", name="me", party=[], timeout=0.0)
    try:
        status = cli.cmd_matchmake(args)
    except KeyboardInterrupt:
        pytest.fail(f"left with the interrupt, the ticket made and not cancelled ({made.calls})")
    assert status == 1
    assert made.calls == ["create", "create", "cancel"] and len(set(made.request_ids)) == 1
    assert "ticket cancelled" in capsys.readouterr().out


class Accepted(Tickets):
    """An invite whose acceptance arrives (the last one: the ticket queues), its answer cut short by Ctrl-C."""

    def AcceptPartyInvite(self, request: pb.AcceptPartyInviteRequest, **_: object) -> pb.TicketUpdate:
        self.calls.append("accept")
        raise KeyboardInterrupt

    def DeclinePartyInvite(self, request: pb.DeclinePartyInviteRequest, **_: object) -> pb.TicketUpdate:
        self.calls.append("decline")
        raise Refused(grpc.StatusCode.FAILED_PRECONDITION, "invite_answered")


def test_ctrl_c_while_an_invite_is_being_accepted_takes_the_acceptance_back(capsys: pytest.CaptureFixture[str]) -> None:
    """The last acceptance queues the ticket: Ctrl-C while it was out left the invitee's seat to be
    matched with nobody following it. Declined then, or, queued already, cancelled (exit 1)."""
    accepted = Accepted()
    args = cli.argparse.Namespace(invites=False, accept=TICKET, decline="", game="", token="t", timeout=0.0)
    try:
        status = cli._answer(accepted, args)  # type: ignore[arg-type]
    except KeyboardInterrupt:
        pytest.fail(f"left with the interrupt, the acceptance standing ({accepted.calls})")
    assert status == 1
    assert accepted.calls == ["accept", "decline", "cancel"]
    assert "ticket cancelled" in capsys.readouterr().out


class Refusing(Made):
    def CreateTicket(self, request: pb.CreateTicketRequest, **_: object) -> pb.CreateTicketResponse:
        self.calls.append("create")
        raise Refused(grpc.StatusCode.NOT_FOUND, "unknown_player", f"not registered: {request.party[0]}")


@pytest.mark.parametrize("name", ["me", "[/b]"])
def test_a_refusal_quoting_what_was_asked_is_printed_as_it_is(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str], name: str) -> None:
    """A refusal's details (or a name) quoting a `[/...]` of the request were read as rich markup:
    a MarkupError and its traceback, exit 1 (a ticket that ended without a match), not 2."""
    monkeypatch.setattr(cli, "dial", lambda _address: type("Channel", (), {"close": lambda self: None})())
    monkeypatch.setattr(cli.pb_grpc, "PlayerServiceStub", lambda _channel: Guests())
    monkeypatch.setattr(cli.pb_grpc, "MatchmakingServiceStub", lambda _channel: Refusing())
    args = cli.argparse.Namespace(address="localhost:1", invites=False, accept="", decline="", game="grifters",
                                  option=[], seats="", token="", name=name, party=["[/x]"], timeout=0.0)
    assert cli.cmd_matchmake(args) == 2
    out = capsys.readouterr().out
    assert "not registered: [/x]" in out and f"({name})" in out


class EndedMeanwhile(Accepted):
    def DeclinePartyInvite(self, request: pb.DeclinePartyInviteRequest, **_: object) -> pb.TicketUpdate:
        self.calls.append("decline")
        raise Refused(grpc.StatusCode.FAILED_PRECONDITION, "ticket_cancelled")

    def GetTicket(self, request: pb.GetTicketRequest, **_: object) -> pb.TicketUpdate:
        self.calls.append("get")
        return pb.TicketUpdate(ticket_id=TICKET, state=pb.TICKET_CANCELLED, reason="cancelled by g0")


def test_ctrl_c_while_accepting_an_invite_that_ended_meanwhile_reports_its_end(
        capsys: pytest.CaptureFixture[str]) -> None:
    ended = EndedMeanwhile()
    args = cli.argparse.Namespace(invites=False, accept=TICKET, decline="", game="", token="t", timeout=0.0)
    assert cli._answer(ended, args) == 1  # type: ignore[arg-type]
    assert ended.calls == ["accept", "decline", "get"] and "cancelled by g0" in capsys.readouterr().out


class Unanswered(Made):
    """A server whose CreateTicket makes the ticket, its answer lost the first time (no answer)."""

    def __init__(self, lost: grpc.StatusCode) -> None:
        super().__init__()
        self.lost = lost
        self.watches = [[SEARCHING, MATCHED]]

    def CreateTicket(self, request: pb.CreateTicketRequest, **_: object) -> pb.CreateTicketResponse:
        self.calls.append("create")
        self.request_ids.append(request.request_id)
        if len(self.request_ids) == 1:
            raise Refused(self.lost)
        return pb.CreateTicketResponse(ticket_id=TICKET, duplicate=True, ticket=SEARCHING)


@pytest.mark.parametrize("lost", [grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE])
def test_a_ticket_whose_creation_went_unanswered_is_asked_for_again_and_followed(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], lost: grpc.StatusCode) -> None:
    """CreateTicket without an answer left with 2 while the server may have made the ticket: searching
    with nobody to follow it, matched to a seat nobody holds. The same request id answers with it."""
    made = Unanswered(lost)
    monkeypatch.setattr(cli, "dial", lambda _address: type("Channel", (), {"close": lambda self: None})())
    monkeypatch.setattr(cli.pb_grpc, "PlayerServiceStub", lambda _channel: Guests())
    monkeypatch.setattr(cli.pb_grpc, "MatchmakingServiceStub", lambda _channel: made)
    args = cli.argparse.Namespace(address="localhost:1", invites=False, accept="", decline="", game="grifters",
                                  option=[], seats="", token="", name="me", party=[], timeout=0.0)
    assert cli.cmd_matchmake(args) == 0
    assert made.calls == ["create", "create", "watch"] and len(set(made.request_ids)) == 1
    assert "seat-token-of-mine" in capsys.readouterr().out


class AcceptedUnanswered(Tickets):
    """An acceptance that arrives (the last one: the ticket queues), its answer lost the first time."""

    def __init__(self) -> None:
        super().__init__([SEARCHING, MATCHED])

    def AcceptPartyInvite(self, request: pb.AcceptPartyInviteRequest, **_: object) -> pb.TicketUpdate:
        self.calls.append("accept")
        if self.calls.count("accept") == 1:
            raise Refused(grpc.StatusCode.DEADLINE_EXCEEDED)
        return SEARCHING  # joined already: answered as the first acceptance was


def test_an_acceptance_that_went_unanswered_is_made_again_and_followed(capsys: pytest.CaptureFixture[str]) -> None:
    """`--accept` without an answer left with 2 while the acceptance may have queued the ticket:
    the invitee's seat matched with nobody following it."""
    accepted = AcceptedUnanswered()
    args = cli.argparse.Namespace(invites=False, accept=TICKET, decline="", game="", token="t", timeout=0.0)
    assert cli._answer(accepted, args) == 0  # type: ignore[arg-type]
    assert accepted.calls == ["accept", "accept", "watch"]
    assert "seat-token-of-mine" in capsys.readouterr().out
