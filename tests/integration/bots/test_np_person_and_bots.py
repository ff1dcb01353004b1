"""A person and two bots play Nothing Personal to the end over the real path (NP-H9).

With a person at the table the window answers are held back from the stream until the window
resolves (stage.lua, then the append that writes them first), and the bots' dispatcher, which
reads the streams, must still see every decision of theirs through: the worker plays on a seat
still asked after held answers, leases and the stall timer count them (docs/bots.md). The
person is this test, sending random legal commands over gRPC; the bots are the real
dispatcher and a real Celery worker.
"""

from __future__ import annotations

import random
import time
import uuid

import pytest

from famiglia.v1 import envelope_pb2

from .conftest import BotsStack

pytestmark = [pytest.mark.redis, pytest.mark.xdist_group("bots")]

GAME = "nothing_personal"
PERSON = 0


def test_a_person_and_two_bots_finish_a_match_holding_back_the_answers_that_wait(bots_stack: BotsStack) -> None:
    info = [envelope_pb2.SeatInfo(seat=s, bot=True, policy="random", player_id=f"bot{s}") for s in (1, 2)]
    handle = bots_stack.create_match(GAME, 3, seed=11, seat_info=info)
    person = bots_stack.client.seat(handle.match_id, handle.seat_tokens[PERSON])
    rng = random.Random(11)
    held = window_answers = 0
    deadline = time.monotonic() + 240
    while True:
        assert time.monotonic() < deadline, "the match did not end in time"
        view = person.view()
        if view.finished:
            break
        if PERSON not in {p.seat for p in view.to_act}:
            time.sleep(0.01)
            continue
        legal = person.legal_commands(limit=32).commands
        try:
            reply = person.submit(rng.choice(list(legal)), command_id=uuid.uuid4().hex,
                                  expected_version=view.version)
        except Exception:  # noqa: BLE001 - the bots moved the match meanwhile: look again
            continue
        answered = any(e.type == "window_answered" for e in reply.events)
        window_answers += answered
        held += reply.held
        # An answer is held exactly when the window still waits for others (the bots usually
        # answer first, so the person's answer usually closes it: public events in the reply).
        assert reply.held == (answered and [e.type for e in reply.events] == ["window_answered"])
        if reply.held:  # the table sees nothing of it: the version did not move
            assert reply.version == view.version and all(e.seq == 0 for e in reply.events)
    assert window_answers  # the person answered windows (`held`: how many of them waited for bots)
    assert bots_stack.command.store.read_staged(handle.match_id) == []
