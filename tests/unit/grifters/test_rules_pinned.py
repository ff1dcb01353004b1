"""Grifters rules a mutation of the engine once changed without any other test noticing, and a
setup whose hands are dealt empty."""

from __future__ import annotations

from famiglia.grifters.v1 import grifters_pb2 as pb
from famiglia.rules.grifters import ENGINE
from tests.unit.grifters._helpers import (
    CON,
    ENFORCER,
    FEMME,
    HITMAN,
    SMUGGLER,
    act,
    caper,
    kinds,
    of_kind,
    sp,
    table,
)


def test_gr_d06_use_defaults_covers_the_femme_fatales_second_caper() -> None:
    """GR-D06: with `use_defaults` "every follow-up choice of that caper at once takes its
    default"; the Femme Fatale's second caper is part of her text (GR-K15, GR-C12). Its
    Enforcer's opponent choice must take the GR-D03 default, the opponent with the largest
    Stash (seat 2 here), without opening a choice (mutant: the second caper drops use_defaults
    and asks)."""
    s = table(3, hands={0: ["R0-MM", FEMME, ENFORCER]}, stash={0: 3, 1: 2, 2: 5})
    cmd = pb.Command()
    cmd.pull_caper.card = FEMME
    cmd.pull_caper.use_defaults = True
    cmd.pull_caper.second_caper = ENFORCER
    after, events = act(s, cmd)
    assert "choice_opened" not in kinds(events)
    assert [e.opponent for e in of_kind(events, "opponent_chosen")] == [2]
    assert after.players[2].stash == 2 and after.players[0].stash == 6
    assert after.active == 1  # the turn ran on


def test_gr_e08_gr_r08_setup_with_empty_hands_ends_the_game_instead_of_crashing() -> None:
    """GR-F01 accepts `ringleaders` (here none) and `start_specialists: 0`, so every hand starts
    empty. GR-R07/GR-R08: each turn puts a token down (or nothing); GR-E08: "the game ends right
    after Phase 3 of that round's last turn and is scored as usual". Setup hands back events
    that end the game (before, the round limit's internal GameOver escaped from `setup`)."""
    from famiglia.engine import MatchConfig, RuleViolation, fold
    from famiglia.rules.grifters import ENGINE

    options = {"ringleaders": "", "start_specialists": "0", "max_rounds": "2"}
    try:
        events = ENGINE.setup(MatchConfig(2, options), 1)
    except RuleViolation:
        return  # refusing the configuration would be fine too
    state = fold(ENGINE, events)
    assert state.over and state.end_reason == "round_limit"
    assert ENGINE.result(state) is not None


def test_gr_d05_hideout_order_sorts_the_cards_of_one_night_space() -> None:
    """GR-D05: "within a Night space, canonical card order", whatever order the Team lies in;
    GR-D03: the Hitman's default is the first Specialist in Hideout order (mutants: the Team's
    stored order, or its reverse)."""
    team = [sp(16, 2), sp(2, 1), SMUGGLER]  # SP16-2, SP02-1, SP09-1: not canonical
    s = table(2, hands={0: [HITMAN, CON]}, nights={1: [team, [], []]})
    s, _ = act(s, caper(HITMAN))
    order = [c.hit_specialist.card for c in ENGINE.legal_commands(s, 0)]
    assert order == [sp(2, 1), SMUGGLER, sp(16, 2)]
    s = table(2, hands={0: [HITMAN, CON]}, nights={1: [team, [], []]})
    s, events = act(s, caper(HITMAN, use_defaults=True))
    assert [e.card for e in of_kind(events, "specialist_hit")] == [sp(2, 1)]
