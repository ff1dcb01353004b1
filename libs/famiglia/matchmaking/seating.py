"""Who sits where. Seat order matters in every game (who starts), so it is shuffled,
but deterministically from the proposal id: every matcher that handles one proposal
(and a recovery after a crash) seats it alike."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any

from .model import Proposal


@dataclass(frozen=True, slots=True)
class SeatPlan:
    seat: int
    player_id: str = ""
    ticket_id: str = ""
    bot: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"seat": self.seat, "player_id": self.player_id, "ticket_id": self.ticket_id, "bot": self.bot}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SeatPlan:
        return cls(int(data["seat"]), str(data.get("player_id", "")), str(data.get("ticket_id", "")),
                   bool(data.get("bot", False)))


def plan_seats(proposal: Proposal) -> list[SeatPlan]:
    """Humans and bots in a shuffled order, seat 0..N-1."""
    occupants = [(p, t.ticket_id) for t in proposal.tickets for p in t.players]
    occupants += [("", "")] * proposal.bots
    seed = int.from_bytes(hashlib.sha256(proposal.proposal_id.encode()).digest()[:8], "big")
    random.Random(seed).shuffle(occupants)
    return [SeatPlan(seat, player, ticket, bot=not player) for seat, (player, ticket) in enumerate(occupants)]
