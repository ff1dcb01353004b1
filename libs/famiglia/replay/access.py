"""Who may see what in a replay.

While a match runs, a replay must not become a side channel: a seat token sees
what that seat saw, a spectator what the public saw, at every event. Once the
match is over everything may be shown (deck orders, hands, the seed), which is
what post-game review wants; `ReplayPolicy.full_after_finish` turns that off
for deployments that keep secrets for good.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from google.protobuf import text_format
from google.protobuf.message import Message

from famiglia.engine import Engine


class Scope(enum.IntEnum):
    """Mirrors famiglia.v1.ViewScope."""

    SPECTATOR = 1
    SEAT = 2
    FULL = 3


@dataclass(frozen=True, slots=True)
class Access:
    scope: Scope
    seat: int | None = None

    @property
    def viewer(self) -> int | None:
        """The engine's viewer: the seat, or None (spectator; a full view starts from it)."""
        return self.seat if self.scope is Scope.SEAT else None


@dataclass(frozen=True, slots=True)
class ReplayPolicy:
    full_after_finish: bool = True
    """Anyone may ask for the full view (and an export) once the match is over."""
    full_while_running: bool = False
    """Everything even before the end: only for trusted, internal deployments."""


class NotAllowed(Exception):
    """The asker may not have what it asked for; `code` is stable."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def grant(policy: ReplayPolicy, *, seat: int | None, want_full: bool, finished: bool) -> Access:
    """The access a request gets, or NotAllowed when it asked for more than it may see."""
    if want_full:
        if policy.full_while_running or (finished and policy.full_after_finish):
            return Access(Scope.FULL)
        if not finished:
            raise NotAllowed("match_running", "the full view is shown once the match is over")
        raise NotAllowed("full_view_disabled", "this server does not show full views")
    if seat is None:
        return Access(Scope.SPECTATOR)
    return Access(Scope.SEAT, seat)


def may_see_everything(policy: ReplayPolicy, finished: bool) -> bool:
    return policy.full_while_running or (finished and policy.full_after_finish)


def shows_command_id(access: Access, acting_seat: int) -> bool:
    """Whether an event's command id is shown: a full view's, or the asker's own command's.
    A command id is its sender's idempotency key, chosen by its client: another seat's could
    tell what that client knew (a bots task's name the version and turn it played, NP-H9)."""
    return access.scope is Scope.FULL or (access.scope is Scope.SEAT and acting_seat == access.seat)


def shown_event(engine: Engine, event: Message, access: Access) -> Message | None:
    """The event as this access may see it: whole for FULL, else the engine's redaction."""
    if access.scope is Scope.FULL:
        return event
    return engine.redact(event, access.viewer)


def view_text(view: Message) -> str:
    """A view's text form: the proto text format, which shows only what the view holds."""
    return text_format.MessageToString(view, as_one_line=False)


def seat_views(engine: Engine, state: Any, seats: int) -> list[Message]:
    return [engine.view(state, seat) for seat in range(seats)]
