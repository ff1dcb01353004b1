"""Several `python -m services.matchmaking` processes on one Redis and one GameService:
players queue through any of them, every process runs its matcher, and still nobody is
seated twice — checked against the matches the command service actually stored."""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.v1 import envelope_pb2
from famiglia.v1 import matchmaking_service_pb2 as pb
from famiglia.v1 import matchmaking_service_pb2_grpc as pb_grpc
from tests.profile import examples
from tests.support.processes import start_service

from .test_grpc_e2e import GAMES, SECRET, command_address  # noqa: F401 - the fixture is used by name

PROCESSES = 2
pytestmark = [pytest.mark.skipif(not GAMES, reason="no game engine registered yet"), pytest.mark.slow]


@pytest.fixture()
def servers(redis_url: str, command_address: str, tmp_path: Path) -> Iterator[list[str]]:  # noqa: F811
    procs = []
    try:
        for index in range(PROCESSES):
            env = dict(os.environ)
            env.update({
                "FAMIGLIA_REDIS_URL": redis_url, "FAMIGLIA_SECRET": SECRET, "FAMIGLIA_COMMAND_ADDR": command_address,
                "FAMIGLIA_MATCHMAKING_ADDR": "127.0.0.1:0", "FAMIGLIA_MM_BACKFILL_AFTER": "1.5",
                "FAMIGLIA_MM_WINDOW_START": "100", "FAMIGLIA_MM_TICK": "0.02", "FAMIGLIA_MM_BOT_POLICY": "random",
                "FAMIGLIA_DATABASE_URL": "", "OTEL_SDK_DISABLED": "true",
            })
            procs.append(start_service("services.matchmaking", env, tmp_path / f"matchmaking-{index}.log"))
        yield [f"127.0.0.1:{port}" for _, port in procs]
    finally:
        for proc, _ in procs:
            proc.send_signal(signal.SIGTERM)
        for proc, _ in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_matcher_processes_never_double_book(servers: list[str], redis_url: str) -> None:
    game = GAMES[0].info
    channels = [grpc.insecure_channel(a) for a in servers]
    n = examples(90, 1500)

    def one_player(i: int) -> tuple[str, pb.TicketUpdate]:
        channel = channels[i % len(channels)]  # each player talks to "its" replica
        guest = pb_grpc.PlayerServiceStub(channel).RegisterGuest(pb.RegisterGuestRequest(display_name=f"P{i}"),
                                                                timeout=30)
        auth = [("authorization", f"Bearer {guest.player_token}")]
        tickets = pb_grpc.MatchmakingServiceStub(channel)
        counts = list(range(game.min_players, game.max_players + 1))[: 1 + i % (game.max_players - game.min_players + 1)]
        ticket = tickets.CreateTicket(pb.CreateTicketRequest(game_id=game.game_id, seat_counts=counts,
                                                             request_id=f"r{i}"), metadata=auth, timeout=30)
        updates = list(tickets.WatchTicket(pb.WatchTicketRequest(ticket_id=ticket.ticket_id), metadata=auth,
                                           timeout=60))
        return guest.player_id, updates[-1]

    with ThreadPoolExecutor(max_workers=32) as pool:
        finals = dict(pool.map(one_player, range(n)))
    for c in channels:
        c.close()

    assert {u.state for u in finals.values()} == {pb.TICKET_MATCHED}
    store = RedisEventStore.connect(redis_url)
    seated: Counter[str] = Counter()
    try:
        for match_id in {u.match_id for u in finals.values()}:
            created = envelope_pb2.MatchCreated.FromString(store.read(match_id, limit=1)[0].payload)
            for info in created.seat_info:
                if not info.bot:
                    seated[info.player_id] += 1
                    assert finals[info.player_id].match_id == match_id
                    assert finals[info.player_id].seat == info.seat
    finally:
        store.close()
    assert set(seated) == set(finals) and set(seated.values()) == {1}
