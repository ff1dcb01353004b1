"""Signed tokens: seat tokens bound to a match and seat, player tokens bound to a player."""

from .tokens import InvalidToken, SeatClaim, TokenSigner

__all__ = ["InvalidToken", "SeatClaim", "TokenSigner"]
