"""Tournament standings do not depend on the order finished matches are projected
(docs/projection.md: an incremental build and a rebuild give identical tables)."""
from __future__ import annotations

from pathlib import Path

from famiglia.eventstore import PartitionEntry
from famiglia.readmodels.db import make_engine
from services.projection import schema
from services.projection.projector import Projector
from tests.integration.projection.dice_race import ENGINE, GAME_ID, registry
from tests.integration.projection.support import Clock, MatchSpec, _batches, dump

PLAYERS = ["ann", "bob", "cat", "dan"]


def _match(i: int) -> list[PartitionEntry]:
    spec = MatchSpec(match_id=f"t{i:02d}", players=PLAYERS, seed=900 + i, game_id=GAME_ID, tournament_id="cup")
    out = []
    for command_id, envelopes in _batches(ENGINE, spec, Clock(1_700_000_000_000 + i * 10_000_000)):
        if command_id == "done":
            break
        out += [PartitionEntry(i % 4, f"{e.timestamp.ToMilliseconds()}-{e.seq}", e) for e in envelopes]
    return out


def test_standings_points_are_the_same_whatever_order_matches_finish_in(tmp_path: Path) -> None:
    matches = [_match(i) for i in range(12)]
    tables = []
    for name, order in (("fwd", matches), ("rev", matches[::-1])):
        engine = make_engine(f"sqlite:///{tmp_path / (name + '.db')}")
        schema.upgrade(engine)
        projector = Projector(engine, registry())
        for entries in order:  # each match committed by its own batch (its partition's consumer)
            projector.project(entries)
        tables.append(dump(engine)["tournament_standings"])
        engine.dispose()
    assert tables[0] == tables[1]
