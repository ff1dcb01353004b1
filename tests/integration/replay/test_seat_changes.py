"""Random matches whose seats change hands at random points (LeaveMatch, a clock run out too
often, ReturnToMatch, all through the command service's use cases on a real Redis), as replay
reads them over gRPC: each verifies, every seat change stands where the rules put it, and an
export imported under a new id is the same match (every field but its ids), verifies, and
replays alike. `make test` plays one match a game; `make soak` several."""

from __future__ import annotations

import pytest

from famiglia.eventstore.envelopes import SEAT_CHANGES
from famiglia.matchstate import MatchState
from famiglia.replay.client import operator_token
from famiglia.replay.export import load
from tests.profile import SOAK, examples
from tests.support.seat_changes import play_with_seat_changes, seat_change_problems

from ...unit.replay.games import registry
from .conftest import SECRET, Stack
from .test_replay_audit import _changed

pytestmark = pytest.mark.redis

GAMES = [g for g in registry() if g != "replay_toy"]
SEEDS = examples(quick=1, soak=8)


@pytest.mark.parametrize("game_id", GAMES)
def test_matches_with_random_seat_changes_verify_and_survive_an_export_and_import(stack: Stack,
                                                                                  game_id: str) -> None:
    engine = registry().get(game_id)
    changed = 0
    for seed in range(SEEDS):
        seats = engine.info.min_players + seed % (engine.info.max_players - engine.info.min_players + 1)
        played = play_with_seat_changes(stack.commands, game_id, seats, seed=40 + seed)
        envelopes = stack.store.read(played.match_id)
        changed += sum(e.type in SEAT_CHANGES for e in envelopes)
        assert MatchState.from_envelopes(registry(), envelopes).finished
        assert seat_change_problems(registry(), envelopes) == []
        report = stack.client.verify(match_id=played.match_id)
        assert report.ok, (seed, report.divergence)
        original = load(stack.client.export(played.match_id, binary=True).file)
        copy_id = f"copy-{game_id}-{seed}"
        answer = stack.client.import_file(stack.client.export(played.match_id, binary=True).file,
                                          token=operator_token(SECRET), new_match_id=copy_id)
        assert answer.verification.ok and answer.version == len(envelopes)
        copy = load(stack.client.export(copy_id, binary=True).file)
        assert _changed(original, copy) == {"events.event_id", "events.match_id", "match_id", "exported_at"}
        assert stack.client.verify(match_id=copy_id).ok
        upto = 0 if SOAK else 150  # a Nothing Personal match's every view takes seconds to stream
        assert [s.view for s in stack.client.stream(match_id=copy_id, full=True, to_seq=upto)] == \
            [s.view for s in stack.client.stream(match_id=played.match_id, full=True, to_seq=upto)]
    assert changed, "no seat changed hands in any match: the randomized suite checks nothing of them"
