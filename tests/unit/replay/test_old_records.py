"""Matches recorded by older versions of the server, read by today's code.

After a deploy, Redis and the SQL archive hold events the old code wrote: every
reader folds them with today's engines, and the command service carries on the
matches still running. `tests/fixtures/compat/` holds small exports written by
old commits' command service (in memory, seeded random play; `manifest.json`
says which commit, and what that code computed). For each, today's code must:

- admit it (ImportMatch's checks: it parses, folds and shows at every event);
- verify it, or diverge exactly where a documented rule change in `decide` says
  (events are facts: a rule fix changes what is decided next, not what the
  recorded events meant — the manifest's `note` names the change);
- fold it to the result the old code computed;
- show it at any event (GetStateAt in the middle and at the end);
- carry it on: today's command service picks the match up at a command and
  plays it to the end (a match running across a deploy).

A new fixture comes from an old tree: play through its command app, export
with `build_export`/`dump(binary=True)`, gzip, and add its manifest entry.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from famiglia.config import Settings
from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.matchstate import MatchState
from famiglia.replay.admission import stored_envelopes
from famiglia.replay.export import load
from famiglia.replay.sources import MemorySource
from famiglia.replay.verify import verify_export
from famiglia.v1.replay_service_pb2 import MatchExport
from services.command.app import Viewer
from services.command.bootstrap import bootstrap as command_bootstrap
from services.replay.bootstrap import ReplaySettings
from services.replay.bootstrap import bootstrap as replay_bootstrap

from .games import registry

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "compat"
MANIFEST: dict[str, dict] = json.loads((FIXTURES / "manifest.json").read_text())
SETTINGS = Settings(secret="old-records-secret")


def _export(name: str) -> MatchExport:
    return load(gzip.decompress((FIXTURES / name).read_bytes()))


def test_every_fixture_is_listed_and_small() -> None:
    files = {p.name for p in FIXTURES.glob("*.export.bin.gz")}
    assert files == set(MANIFEST)
    assert all((FIXTURES / f).stat().st_size < 16_000 for f in files)
    assert {MANIFEST[f]["game"] for f in files} == {"goodcritters", "grifters", "nostra_city", "nothing_personal"}


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_old_record_is_admitted_and_verifies_or_parts_where_the_rules_changed(name: str) -> None:
    want = MANIFEST[name]
    export = _export(name)
    assert export.game_id == want["game"] and len(export.events) == want["events"]
    stored_envelopes(registry(), export, "compat-import")  # raises Refused when unreadable
    report = verify_export(registry(), export)
    if want["verify"] == "ok":
        assert report.ok, report.describe()
    else:
        assert report.divergence is not None, f"{name} verifies now: update its manifest entry"
        got = {"seq": report.divergence.seq, "reason": report.divergence.reason}
        assert got == want["verify"], report.describe()


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_old_record_folds_to_the_result_the_old_code_computed(name: str) -> None:
    want = MANIFEST[name]
    envelopes = list(_export(name).events)
    match = MatchState.start(registry(), envelopes[0])
    match.apply(envelopes[1:])
    result = match.result()
    if not want["finished"]:
        assert match.engine.pending(match.state), "a running match still asks someone"
        return
    assert result is not None
    assert [s.rank for s in result.seats] == want["result"]["ranks"]
    assert [float(s.score) for s in result.seats] == want["result"]["scores"]
    assert dict(result.outcome) == want["result"]["outcome"]


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_old_record_shows_at_any_event(name: str) -> None:
    envelopes = list(_export(name).events)
    store = InMemoryEventStore()
    store.append(envelopes[0].match_id, 0, envelopes)
    app = replay_bootstrap(store=store, cold=MemorySource(), registry=registry(), settings=SETTINGS,
                           replay_settings=ReplaySettings())
    middle = envelopes[len(envelopes) // 2]
    assert app.state_at(middle.event_id, None).view is not None
    last = app.state_at(envelopes[-1].event_id, None, full=MANIFEST[name]["finished"])
    assert last.view is not None


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_todays_command_service_carries_an_old_match_on_to_its_end(name: str) -> None:
    envelopes = list(_export(name).events)
    starts = [e.seq for e in envelopes if e.command]
    cut = len(envelopes) if not MANIFEST[name]["finished"] else starts[len(starts) // 2] - 1
    match_id = envelopes[0].match_id
    store = InMemoryEventStore()
    store.append(match_id, 0, envelopes[:cut])
    app = command_bootstrap(store=store, registry=registry(), settings=SETTINGS)
    chooser = random.Random(cut)
    for k in range(5000):
        m = app.matches.get(match_id).match
        pending = m.engine.pending(m.state)
        if not pending:
            break
        seats = sorted({p.seat for p in pending})
        seat = seats[chooser.randrange(len(seats))]
        commands = m.engine.legal_commands(m.state, seat, limit=64)
        app.submit(match_id, Viewer(seat), f"after-deploy-{k}", commands[chooser.randrange(len(commands))])
    else:
        pytest.fail("the match did not end")
    assert m.engine.result(m.state) is not None
