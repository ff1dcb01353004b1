"""Play whole matches over gRPC with random legal commands for every seat: the
simplest honest client (it only uses what each seat's token lets it see)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from famiglia.client import GameClient
from famiglia.v1 import game_service_pb2 as pb


@dataclass
class PlayedMatch:
    game_id: str
    match_id: str
    seats: int
    commands: int = 0
    version: int = 0
    result: pb.MatchResult | None = None
    seconds: float = 0.0
    refusals: int = 0
    error: str = ""


def play_match(client: GameClient, game_id: str, seats: int, *, rng: random.Random,
               options: dict[str, str] | None = None, on_command: Callable[[], None] | None = None,
               max_commands: int = 200_000, stop: threading.Event | None = None) -> PlayedMatch:
    """Create a match and play it to the end (or until `stop` is set: Ctrl-C); every seat picks
    uniformly among its legal commands, drawn from the whole of each compound choice (`sample_seed`)."""
    start = time.perf_counter()
    handle = client.create_match(game_id, seats, options=options or {})
    tokens = handle.seat_tokens
    seat_clients = [client.seat(handle.match_id, t) for t in tokens]
    spectator = client.spectator(handle.match_id)
    played = PlayedMatch(game_id, handle.match_id, seats)
    while played.commands < max_commands and not (stop is not None and stop.is_set()):
        view = spectator.view()
        if view.finished:
            played.result = view.result
            played.version = view.version
            break
        # A seat learns privately-asked decisions only from its own view.
        candidates = sorted({p.seat for p in view.to_act})
        if not candidates:
            for s, sc in enumerate(seat_clients):
                if any(p.seat == s for p in sc.view().to_act):
                    candidates.append(s)
        if not candidates:
            raise RuntimeError(f"{handle.match_id}: nobody to act and not finished")
        seat = rng.choice(candidates)
        # drawn from the whole of a compound choice, so random play reaches every legal command
        legal = seat_clients[seat].legal_commands(limit=64, sample_seed=rng.getrandbits(63) | 1)
        if not legal.commands:
            continue
        command = rng.choice(list(legal.commands))
        try:
            seat_clients[seat].submit(command, expected_version=legal.version)
            played.commands += 1
            if on_command:
                on_command()
        except grpc.RpcError as exc:
            if exc.code() in (grpc.StatusCode.ABORTED, grpc.StatusCode.FAILED_PRECONDITION):
                played.refusals += 1
                continue
            raise
    played.seconds = time.perf_counter() - start
    return played


@dataclass
class Progress:
    lock: threading.Lock = field(default_factory=threading.Lock)
    commands: int = 0
    done: dict[str, int] = field(default_factory=dict)

    def command(self) -> None:
        with self.lock:
            self.commands += 1
