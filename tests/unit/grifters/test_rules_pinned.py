"""Grifters rules a mutation of the engine once changed without any other test noticing, and a
setup whose hands are dealt empty."""

from __future__ import annotations

from famiglia.grifters.v1 import grifters_pb2 as pb
from tests.unit.grifters._helpers import ENFORCER, FEMME, act, kinds, of_kind, table


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
