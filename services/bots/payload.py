"""A bot decision as the dispatcher hands it to a worker: the seat's own view and
its legal commands at one version, so the worker needs no read RPC.

The dispatcher holds every match folded (server-side code may see the true
state); from it this module takes exactly what `GetView` and `ListLegalCommands`
would answer that seat — `engine.view(state, seat)` and
`engine.legal_commands(state, seat, limit)` — never the state itself. The
worker still submits through GameService with `expected_version`, so a payload
made at a version the match has left is refused there and does nothing.

A seat whose policy chooses from the legal commands alone (`random`) gets no view
(an empty one): rendering it was the dearest part of the payload (a view takes
several times a legal listing's CPU, and is 0.35-1.1 kB of a message), and the
worker parses nothing it would not read.

JSON-safe (Celery's serializer): protobuf bytes as base64 text.
"""

from __future__ import annotations

import binascii
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from famiglia.bots.policy import PolicySpec
from famiglia.engine import Engine

LEGAL_LIMIT = 64
"""As many legal commands as the RPC path asks for (ListLegalCommands limit): huge
choices are sampled by the engine, never enumerated."""

VIEWLESS_POLICIES = frozenset({"random"})
"""Policies that never read the view (random_policy.py: uniform over the legal commands,
seeded by the decision). A test holds `random`'s choices equal with and without the view."""


LEASE_POLICIES = frozenset({"random", "heuristic"})
"""Policies that answer in a few milliseconds: a match whose bot seats all play one of them
may be played on by one task through several turns (a lease, docs/bots.md). A search
policy's task keeps to its own decision and its own time budget."""


@functools.lru_cache(maxsize=256)
def leasable(policy: str) -> bool:
    """Whether a seat playing `policy` may be played on by a lease."""
    return PolicySpec.parse(policy).name in LEASE_POLICIES


def turn_order(bots: Sequence[int], version: int) -> list[int]:
    """The bot seats asked at `version` (in the game's pending order) in the order one task
    plays them: rotated by the version, so no seat always chooses first. The dispatcher and
    a lease's worker both use it, so a lease plays what a fresh task would."""
    first = version % len(bots)
    return list(bots[first:]) + list(bots[:first])


HELD_FOLLOW_UP = ":h"
"""The end of the command ids of a task's turns played on after held-back answers (NP-H9),
past its lease or with none: the dispatcher, which did not queue them, reads them as any
other command's and schedules from what it sees next (`handlers.play_bot_decisions`). Once
is enough: a seat whose answer is held is asked no more at that public version (the command
service holds only a command that asks nobody anything new, its own seat included), so a
task never names one seat's follow-up at one version twice (docs/bots.md, "Held-back answers")."""


def bot_command_id(match_id: str, version: int | str, seat: int) -> str:
    """The command id of `seat`'s bot decision submitted at `version` (a batch's later seats
    included: the version each is submitted at), so a retried or redelivered task, a batch
    or a single task, is answered from the first answer. The dispatcher reads a batch's
    progress from these ids (dispatcher.py, `_batch_playing`)."""
    return f"bot:{match_id}:{version}:{seat}"


@functools.lru_cache(maxsize=256)
def reads_view(policy: str) -> bool:
    """Whether a seat playing `policy` (a seat_info.policy string) needs its view in the payload."""
    return PolicySpec.parse(policy).name not in VIEWLESS_POLICIES


@dataclass(frozen=True)
class DecisionPayload:
    """The serialized view of one seat and its legal commands."""

    view: bytes
    legal: tuple[bytes, ...]

    def to_json(self) -> dict[str, Any]:
        # binascii directly: base64.b64encode's wrapper is a third of each (short) command's cost.
        encode = binascii.b2a_base64
        return {"view": encode(self.view, newline=False).decode("ascii"),
                "legal": [encode(c, newline=False).decode("ascii") for c in self.legal]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> DecisionPayload | None:
        """The payload of a task message; None for a message without one (sent before
        payloads existed, or by another sender): the worker then reads over gRPC."""
        if not data or "view" not in data or "legal" not in data:
            return None
        # binascii directly, as base64.b64decode does under its wrapper (the worker decodes every command).
        decode = binascii.a2b_base64
        return cls(decode(data["view"]), tuple(map(decode, data["legal"])))

    def messages(self, engine: Engine) -> tuple[Any, tuple[Any, ...]]:
        """(view, legal commands) as the game's own View and Command messages."""
        info = engine.info
        assert info.view_type is not None and info.command_type is not None
        return info.view_type.FromString(self.view), tuple(map(info.command_type.FromString, self.legal))


def seat_payload(engine: Engine, state: Any, seat: int, limit: int = LEGAL_LIMIT, *,
                 view: bool = True) -> DecisionPayload:
    """What `seat` may know at this state: its own view (unless `view` is False: an empty
    one, for a policy that never reads it) and its legal commands."""
    legal = engine.legal_commands(state, seat, limit=limit)
    return DecisionPayload(engine.view(state, seat).SerializeToString() if view else b"",
                           tuple([c.SerializeToString() for c in legal]))
