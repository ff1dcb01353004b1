"""The Python client SDK: what a bot, the CLI or a test uses to play over gRPC."""

from .game_client import GameClient, MatchHandle, SeatClient

__all__ = ["GameClient", "MatchHandle", "SeatClient"]
