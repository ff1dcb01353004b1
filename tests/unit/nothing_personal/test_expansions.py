"""NP-V7: expansion gangster sets are data files in the Table G format, shuffled into the gangster deck.

The set used here is test data (`expansions/test_gangsters.toml`: 18 invented cards, TS01..TS18),
installed through the engine construction parameter; no real set is shipped.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from famiglia.engine import MatchConfig, RuleViolation, fold
from famiglia.rules.nothing_personal import ENGINE, engine
from famiglia.rules.nothing_personal.data import GANGSTERS, GIDX, REFUSED, SETS, G, match_gangsters
from famiglia.rules.nothing_personal.expansions import install
from famiglia.testing.random_play import play_random

from .support import kinds, new, of

FIXTURES = Path(__file__).parent / "expansions"
TEST_SET = "test_gangsters"
OPTIONS = {"expansions": TEST_SET}


@pytest.fixture(scope="module", autouse=True)
def _installed() -> None:
    assert engine(FIXTURES) is ENGINE


def _test_ids() -> set[str]:
    return {g.id for g in SETS[TEST_SET]}


def test_np_v7_the_test_set_is_installed_from_its_table_g_file() -> None:
    """NP-V7."""
    cards = SETS[TEST_SET]
    assert len(cards) == 18 and all(g.id.startswith("TS") for g in cards)
    assert all(G[g.id] is g for g in cards)
    assert sorted(GIDX[g.id] for g in cards)[0] >= len(GANGSTERS)   # base indices never move
    assert install(FIXTURES) == []   # installing again changes nothing


def test_np_v7_an_absent_set_is_refused_with_a_stable_code() -> None:
    """NP-V7."""
    for name in ("Young Turks", "Game Designers Set", "historical_gangsters_set"):
        with pytest.raises(RuleViolation) as exc:
            new(4, expansions=name)
        assert exc.value.code == "NP-V7"
        assert ".toml" in str(exc.value)
    with pytest.raises(RuleViolation) as exc:
        new(4, expansions=f"{TEST_SET},{TEST_SET}")
    assert exc.value.code == "NP-V7"


def test_np_v7_a_set_file_that_fails_the_checks_is_refused_with_its_reason(tmp_path: Path) -> None:
    """NP-V7: 18 cards, no starting Capo, new ids; NP-S4 checks per card."""
    rows = (FIXTURES / f"{TEST_SET}.toml").read_text().replace('id = "TS', 'id = "ZQ')
    (tmp_path / "short_set.toml").write_text(rows.rsplit("[[gangster]]", 1)[0])      # 17 cards
    (tmp_path / "copied_set.toml").write_text((FIXTURES / f"{TEST_SET}.toml").read_text())   # ids taken
    assert install(tmp_path) == []
    assert "short_set" in REFUSED and "copied_set" in REFUSED
    for name, why in (("short_set", "17 gangsters"), ("copied set", "duplicate gangster id")):
        with pytest.raises(RuleViolation) as exc:
            new(3, expansions=name)
        assert exc.value.code == "NP-V7" and why in str(exc.value)


def test_np_v7_the_set_is_shuffled_into_the_gangster_deck() -> None:
    """NP-V7: board, set-aside and deck hold the base cards and the set's, each once."""
    s = new(4, seed=3, **OPTIONS)
    zones = [g for g in s.board if g] + list(s.gdeck)
    assert Counter(zones) == Counter(g.id for g in match_gangsters((TEST_SET,)))
    assert len(zones) == len(GANGSTERS) + 18
    assert s.cfg.expansions == (TEST_SET,)
    seen = {g for seed in range(12) for g in new(3, seed=seed, **OPTIONS).board if g}
    assert seen & _test_ids(), "the set's cards reach the board"
    base = new(4, seed=3)
    assert len(base.gs) == len(GANGSTERS) and not set(base.gdeck) & _test_ids()


def test_np_v7_the_deal_is_deterministic_and_the_set_changes_it() -> None:
    """NP-V7."""
    config = MatchConfig(4, OPTIONS)
    one, two = ENGINE.setup(config, 11), ENGINE.setup(config, 11)
    assert [e.SerializeToString() for e in one] == [e.SerializeToString() for e in two]
    deck = of(one, "gangster_deck_ordered")[0].cards
    base_deck = of(ENGINE.setup(MatchConfig(4), 11), "gangster_deck_ordered")[0].cards
    assert len(deck) == len(base_deck) + 18 and list(deck) != list(base_deck)


def test_np_v7_set_cards_are_played_in_complete_games() -> None:
    """NP-V7: the set's gangsters get markers, act and score; folding the events again gives the same table."""
    ids = _test_ids()
    placed = 0
    for seed in range(4):
        p = play_random(ENGINE, 3 + seed % 3, seed, OPTIONS)
        assert ENGINE.result(p.state) is not None
        placed += sum(1 for e in of(p.events, "markers_placed") if e.gangster in ids)
        assert fold(ENGINE, p.events) == p.state
        assert p.events[0].match_set_up.options["expansions"] == TEST_SET
    assert placed > 0


def test_np_v7_the_gangster_deck_with_the_set_stays_hidden() -> None:
    """NP-V7 with NP-H: the deck order is server-only; views show its size, not its cards."""
    events = ENGINE.setup(MatchConfig(4, OPTIONS), 5)
    s = fold(ENGINE, events)
    order = events[kinds(events).index("gangster_deck_ordered")]
    assert ENGINE.visibility(order).kind.name == "SERVER"
    hidden = [g for g in s.gdeck if g in _test_ids()]
    assert hidden
    for viewer in (None, 0, 3):
        v = ENGINE.view(s, viewer)
        assert v.gangster_deck_size == len(s.gdeck) and not v.gangster_deck
        assert not any(g.encode() in v.SerializeToString() for g in hidden)
        assert dict(v.options)["expansions"] == TEST_SET
    assert dict(ENGINE.view(new(4), 0).options)["expansions"] == ""   # every option is shown: here, no set


def test_np_v7_bots_determinize_a_match_with_the_set() -> None:
    """NP-V7 with the determinization hook: a sampled world has a marker slot for every card of the
    match and deals its hidden gangster deck from the base cards and the set, never from another set."""
    from famiglia.engine import Rng
    from famiglia.rules.nothing_personal.determinize import determinize

    cards = {g.id for g in match_gangsters((TEST_SET,))}
    s = fold(ENGINE, ENGINE.setup(MatchConfig(4, OPTIONS), 3))
    for seat in range(4):
        world = determinize(ENGINE.view(s, seat), seat, Rng(seat))
        assert len(world.gs) == len(s.gs)
        assert len(world.gdeck) == len(s.gdeck)
        assert set(world.gdeck) <= cards and any(g in _test_ids() for g in world.gdeck + world.board)
        assert ENGINE.pending(world) == ENGINE.pending(s)


def test_np_v7_every_service_process_installs_sets_from_famiglia_np_expansions(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """NP-V7 at start-up: the default registry installs the set files of the directory in
    FAMIGLIA_NP_EXPANSIONS, so a service can deal a set that is not in the package."""
    from famiglia.engine.registry import default_registry

    name = "registry_test_gangsters"
    text = (FIXTURES / f"{TEST_SET}.toml").read_text().replace("TS", "RT")
    (tmp_path / f"{name}.toml").write_text(text)
    assert name not in SETS
    monkeypatch.setenv("FAMIGLIA_NP_EXPANSIONS", str(tmp_path))
    registry = default_registry("nothing_personal")
    assert name in SETS and registry.get("nothing_personal") is ENGINE
    s = fold(ENGINE, ENGINE.setup(MatchConfig(3, {"expansions": name}), 1))
    assert {g.id for g in SETS[name]} & set(s.gdeck + s.board)
