"""A rematch of each real game's match: played to its end with random legal commands through the
command service, its table asks, and the rematch is made with the very options the first match
was created with, on another replica too (its fold of the stream must find the match over as the
first replica's does: Nothing Personal's held answers, NP-H9, never leave the end unseen).
The rules one by one, on the toy game: tests/unit/command/test_rematch.py."""

from __future__ import annotations

import random

import pytest

from famiglia.auth import TokenSigner
from famiglia.config import Settings
from famiglia.engine.registry import default_registry
from famiglia.eventstore.envelopes import open_match_created
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.eventstore.rematch_asks import InMemoryRematchAsks
from famiglia.v1 import envelope_pb2
from services.command.app import CommandApp
from services.command.bootstrap import bootstrap
from services.command.rematch import moved_on

SETTINGS = Settings(secret="unit-test-secret")
SIGNER = TokenSigner(SETTINGS.secret)
REGISTRY = default_registry()
GAMES = sorted(e.info.game_id for e in REGISTRY.engines())
#: Options each game is created with, besides its defaults: the rematch must take them back.
OPTIONS = {
    "goodcritters": {"timeouts.turn_s": "45"},
    "grifters": {"max_rounds": "50"},
    "nostra_city": {"end_game_bonus_respect": "3"},
    "nothing_personal": {"commission_turns": "20"},
}


def _replica(store: InMemoryEventStore, asks: InMemoryRematchAsks) -> CommandApp:
    app = bootstrap(store=store, registry=REGISTRY, settings=SETTINGS)
    app.rematches = asks
    return app


def _play_out(app: CommandApp, match_id: str, tokens: list[str], rng: random.Random) -> None:
    hot = app.matches.get(match_id)
    for step in range(3000):
        m = app.matches.catch_up(hot)
        if m.finished:
            return
        seat = rng.choice(sorted({p.seat for p in m.engine.pending(m.state)}))
        viewer = app.viewer(match_id, tokens[seat])
        commands = app.legal_commands(match_id, viewer, limit=32).commands
        app.submit(match_id, viewer, f"c{step}", rng.choice(commands))
    raise AssertionError(f"{m.game_id}: no end in 3,000 commands")


def test_the_options_name_every_real_game() -> None:
    assert GAMES == sorted(OPTIONS)


@pytest.mark.parametrize("game_id", GAMES)
def test_a_played_match_of_each_game_gets_its_rematch(game_id: str) -> None:
    store, asks = InMemoryEventStore(), InMemoryRematchAsks()
    a, b = _replica(store, asks), _replica(store, asks)
    seats = REGISTRY.get(game_id).info.min_players
    info = [envelope_pb2.SeatInfo(seat=s, player_id=f"p{s}") for s in range(seats)]
    created = a.create_match(game_id, seats, seed=7, options=OPTIONS[game_id], seat_info=info)
    match_id = created.match_id
    _play_out(a, match_id, created.seat_tokens, random.Random(7))
    assert b.matches.catch_up(b.matches.get(match_id)).finished

    answers = [(a if s % 2 else b).ask_rematch(match_id, a.viewer(match_id, created.seat_tokens[s]))
               for s in range(seats)]
    made = answers[-1]
    assert made.match_id and made.waiting_for == ()
    for s in range(seats):  # each seat's own, asked again on either replica
        again = (b if s % 2 else a).ask_rematch(match_id, a.viewer(match_id, created.seat_tokens[s]))
        claim = SIGNER.read_seat(again.seat_token)
        assert (again.match_id, claim.match_id, claim.seat, claim.player_id) == \
            (made.match_id, made.match_id, moved_on(s, seats), f"p{s}")
    first = open_match_created(store.read(match_id, limit=1)[0])
    rematch = open_match_created(store.read(made.match_id, limit=1)[0])
    assert first is not None and rematch is not None
    assert (rematch.game_id, rematch.seats, dict(rematch.options)) == (game_id, seats, OPTIONS[game_id])
    assert [(i.seat, i.player_id) for i in rematch.seat_info] == \
        [(s, f"p{(s - 1) % seats}") for s in range(seats)]
    assert rematch.seed != first.seed
