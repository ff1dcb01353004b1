"""A PullCaper may carry the answers of the choices its text will ask (GR-D02, GR-D03, GR-D07)."""

from __future__ import annotations

from typing import Any

import pytest

from famiglia.engine import RuleViolation
from famiglia.grifters.v1 import grifters_pb2 as pb
from famiglia.rules.grifters.state import SECOND

from ._helpers import (
    CON,
    FALL,
    FEMME,
    FIXER,
    FORGER,
    IM,
    KIDNAP,
    MIDDLE,
    THUG,
    act,
    kinds,
    of_kind,
    sp,
    table,
)


def pull(card: str, **answers: Any) -> pb.Command:
    cmd = pb.Command()
    cmd.pull_caper.card = card
    for key, value in answers.items():
        if key == "target":
            cmd.pull_caper.target.opponent, cmd.pull_caper.target.card = value
        elif key == "swap_jobs":
            cmd.pull_caper.swap_jobs.own_job, cmd.pull_caper.swap_jobs.opponent, cmd.pull_caper.swap_jobs.their_job = value
        else:
            setattr(cmd.pull_caper, key, value)
    return cmd


def test_gr_d03_an_advance_opponent_answers_the_pickpocket() -> None:
    """GR-D03, GR-K06: no follow-up is asked when the PullCaper names the opponent."""
    s = table(3, hands={0: ["R0-PP", CON]}, stash={1: 4, 2: 4})
    s, events = act(s, pull("R0-PP", opponent=2))
    assert "choice_opened" not in kinds(events)
    assert [(e.victim, e.amount) for e in of_kind(events, "isk_stolen")] == [(2, 2)]


def test_gr_d03_advance_answers_reach_nested_capers() -> None:
    """GR-C12, GR-K20: a Fall Guy copying the Pickpocket uses both the copy and the opponent."""
    s = table(3, hands={0: [FALL, "R0-PP", CON]}, stash={1: 4, 2: 4})
    s, events = act(s, pull(FALL, copy="R0-PP", opponent=1))
    assert "choice_opened" not in kinds(events) and of_kind(events, "isk_stolen")[0].victim == 1


def test_gr_d03_a_choice_without_an_advance_answer_is_asked_as_a_follow_up() -> None:
    """GR-D03, GR-K08: the Inside Man's target in advance; the abducted Pickpocket then asks."""
    s = table(3, hands={0: [IM, CON]}, nights={1: [["R1-PP"], [sp(15, 1)], []], 2: [[MIDDLE], [], []]})
    s, events = act(s, pull(IM, target=(1, sp(15, 1))))
    assert of_kind(events, "specialist_abducted")[0].card == sp(15, 1)
    assert s.choice == "opponent"


def test_gr_d03_advance_answers_for_optional_and_card_choices() -> None:
    """GR-K11, GR-K12, GR-K15, GR-K18, GR-K21."""
    s = table(2, hands={0: [FORGER, CON]}, jobs={0: ["J-R1"], 1: ["J-B1"]})
    _, events = act(s, pull(FORGER, decline_job_swap=True))
    assert "job_swap_declined" in kinds(events)
    s = table(2, hands={0: [FORGER, CON]}, jobs={0: ["J-R1"], 1: ["J-B1"]})
    s2, _ = act(s, pull(FORGER, swap_jobs=("J-R1", 1, "J-B1")))
    assert s2.players[0].jobs == ("J-B1",)
    s = table(2, hands={0: [FEMME, CON, "R0-TH"]})
    _, events = act(s, pull(FEMME, second_caper=CON))
    assert [e.card for e in of_kind(events, "caper_pulled")] == [FEMME, CON]
    s = table(2, hands={0: [FEMME, CON]})
    s2, events = act(s, pull(FEMME, decline_second_caper=True))
    assert "second_caper_declined" in kinds(events) and s2.choice != SECOND
    s = table(2, hands={0: [FIXER, CON]}, nights={0: [[], [MIDDLE], [THUG]]})
    _, events = act(s, pull(FIXER, night=3))
    assert of_kind(events, "night_returned")[0].night == 3
    s = table(2, hands={0: [THUG, CON, "R0-TH"]})
    _, events = act(s, pull(THUG, partner=CON))
    assert of_kind(events, "partner_chosen")[0].card == CON
    s = table(2, hands={0: [KIDNAP, CON]}, nights={1: [[MIDDLE], [sp(6, 2)], []]})
    _, events = act(s, pull(KIDNAP, target=(1, sp(6, 2))))
    assert of_kind(events, "specialist_kidnapped")[0].card == sp(6, 2)


def test_gr_d07_an_illegal_or_unused_advance_answer_refuses_the_command() -> None:
    """GR-D07, GR-C08, GR-D02: checked like the follow-up it replaces; an unused one is refused."""
    s = table(3, hands={0: ["R0-PP", CON]})
    with pytest.raises(RuleViolation) as exc:
        act(s, pull("R0-PP", opponent=0))
    assert exc.value.code == "GR-C08"
    with pytest.raises(RuleViolation) as exc:
        act(s, pull(CON, opponent=1))
    assert exc.value.code == "GR-D02"
    s = table(2, hands={0: [KIDNAP, CON]}, nights={1: [["R1-TH"], [], []]})
    with pytest.raises(RuleViolation) as exc:
        act(s, pull(KIDNAP, target=(1, "R1-TH")))  # no Specialist to take: the choice never comes
    assert exc.value.code == "GR-D02"
