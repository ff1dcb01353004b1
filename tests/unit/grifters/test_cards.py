"""Cards (GR-K01..GR-K23)."""

from __future__ import annotations

from collections import Counter

import pytest

from famiglia.engine import RuleViolation
from famiglia.rules.grifters import ENGINE
from famiglia.rules.grifters.data import BRAIN, BRAWN, CARDS, RINGLEADERS, SKILLS, SPECIALISTS, SPEED
from famiglia.rules.grifters.state import (
    COPY,
    JOB_SWAP,
    KEEP,
    NIGHT,
    PARTNER,
    SECOND,
    in_hand_order,
)

from ._helpers import (
    CAT,
    CON,
    ENFORCER,
    FALL,
    FEMME,
    FIXER,
    FORGER,
    HITMAN,
    IM,
    INFORMANT,
    KIDNAP,
    MIDDLE,
    RECRUITER,
    SMUGGLER,
    THUG,
    WHEEL,
    act,
    answer,
    caper,
    kinds,
    of_kind,
    sp,
    table,
)


def test_gr_k01_every_card_shows_exactly_one_skill() -> None:
    """GR-K01: every card shows exactly one skill."""
    assert all(c.skill in SKILLS for c in CARDS.values())


def test_gr_k02_card_ids_and_canonical_order() -> None:
    """GR-K02: card ids and canonical order."""
    assert [c.id for c in RINGLEADERS[:3]] == ["R0-MM", "R0-TH", "R0-PP"]
    assert SPECIALISTS[0].id == "SP01-1" and SPECIALISTS[-1].id == "SP16-3"
    assert in_hand_order(["SP02-1", "R0-PP", "SP01-3", "R0-MM"]) == ("R0-MM", "R0-PP", "SP01-3", "SP02-1")


def test_gr_k03_ringleader_skills_and_capers() -> None:
    """GR-K03: ringleader skills and capers."""
    assert [(c.name, c.skill, c.effect) for c in RINGLEADERS[:3]] == [
        ("Mastermind", BRAIN, "mastermind"), ("Thief", SPEED, "thief"), ("Pickpocket", BRAWN, "pickpocket")]


def test_gr_k04_mastermind_draws_three_keeps_one_discards_two_face_up() -> None:
    """GR-K04: mastermind draws three keeps one discards two face up."""
    deck = [sp(6, 1), sp(9, 1), sp(12, 1), sp(2, 1)]
    s = table(2, hands={0: ["R0-MM", "R0-TH"]}, deck=deck)
    s, events = act(s, caper("R0-MM"))
    assert s.choice == KEEP and len(of_kind(events, "card_drawn")) == 3
    assert [c.keep_card.card for c in ENGINE.legal_commands(s, 0)] == deck[:3]
    s, events = act(s, answer(KEEP, sp(9, 1)))
    assert list(of_kind(events, "cards_discarded")[0].cards) == [sp(6, 1), sp(12, 1)]
    assert s.discard == (sp(6, 1), sp(12, 1)) and sp(9, 1) in s.players[0].hand


def test_gr_k04_mastermind_keep_refuses_a_card_not_drawn() -> None:
    """GR-K04: mastermind keep refuses a card not drawn."""
    s = table(2, hands={0: ["R0-MM", "R0-TH"]}, deck=[sp(6, 1), sp(9, 1), sp(12, 1), sp(2, 1)])
    s, _ = act(s, caper("R0-MM"))
    with pytest.raises(RuleViolation) as exc:
        act(s, answer(KEEP, "R0-TH"))
    assert exc.value.code == "GR-K04"


def test_gr_k05_thief_steals_two_from_the_coffers() -> None:
    """GR-K05: thief steals two from the coffers."""
    s = table(2, hands={0: ["R0-TH", CON]}, coffers=30)
    s, _ = act(s, caper("R0-TH"))
    assert s.coffers == 28 and s.players[0].stash == 5


def test_gr_k06_pickpocket_steals_two_from_one_opponent() -> None:
    """GR-K06: pickpocket steals two from one opponent."""
    s = table(2, hands={0: ["R0-PP", CON]}, stash={0: 0, 1: 3})
    s, events = act(s, caper("R0-PP"))  # one opponent: chosen without asking (GR-D04)
    assert of_kind(events, "opponent_chosen")[0].opponent == 1
    assert s.players[0].stash == 2 and s.players[1].stash == 1


def test_gr_k07_sixteen_types_three_copies_skill_counts() -> None:
    """GR-K07: sixteen types three copies skill counts."""
    assert len({c.name for c in SPECIALISTS}) == 16
    assert all(n == 3 for n in Counter(c.name for c in SPECIALISTS).values())
    assert Counter(c.skill for c in SPECIALISTS) == {BRAIN: 15, SPEED: 15, BRAWN: 18}


def test_gr_k08_inside_man_swaps_into_the_team_and_performs_the_caper() -> None:
    """GR-K08: inside man swaps into the team and performs the caper."""
    s = table(2, hands={0: [IM, "R0-TH"]}, nights={1: [[], [CON, "R1-TH"], []]}, coffers=30)
    s, events = act(s, caper(IM))
    ab = of_kind(events, "specialist_abducted")[0]
    assert (ab.opponent, ab.night, ab.card, ab.agent) == (1, 2, CON, IM)
    assert s.players[1].nights[2] == (IM, "R1-TH")  # a member of the Team, advanced since
    assert s.players[0].nights[0] == (CON,) and s.players[0].stash == 6
    assert s.active == 1 and s.swapped_in == frozenset()  # GR-X21's record lasts one turn


def test_gr_k08_inside_man_without_a_target_goes_to_night_one() -> None:
    """GR-K08: inside man without a target goes to night one."""
    s = table(2, hands={0: [IM, "R0-TH"]}, nights={1: [["R1-TH"], [], []]})
    s, events = act(s, caper(IM))
    assert "specialist_abducted" not in kinds(events) and s.players[0].nights[0] == (IM,)


def test_gr_k09_recruiter_draws_two() -> None:
    """GR-K09: recruiter draws two."""
    s = table(2, hands={0: [RECRUITER, CON]}, deck=[sp(6, 2), sp(6, 3), sp(9, 1)])
    s, events = act(s, caper(RECRUITER))
    assert [d.card for d in of_kind(events, "card_drawn")] == [sp(6, 2), sp(6, 3)]


def test_gr_k10_informant_draws_one_then_steals_one() -> None:
    """GR-K10: informant draws one then steals one."""
    s = table(2, hands={0: [INFORMANT, CON]}, coffers=30)
    s, events = act(s, caper(INFORMANT))
    assert len(of_kind(events, "card_drawn")) == 1 and s.coffers == 29


def test_gr_k11_forger_may_swap_one_own_job_with_an_opponents() -> None:
    """GR-K11: forger may swap one own job with an opponents."""
    s = table(2, hands={0: [FORGER, CON]}, jobs={0: ["J-R1"], 1: ["J-B1", "J-G1"]})
    s, _ = act(s, caper(FORGER))
    assert s.choice == JOB_SWAP
    cmds = ENGINE.legal_commands(s, 0)
    assert cmds[0].WhichOneof("kind") == "decline_job_swap" and len(cmds) == 3
    s, _ = act(s, answer(JOB_SWAP, ("J-R1", 1, "J-G1")))
    assert s.players[0].jobs == ("J-G1",) and s.players[1].jobs == ("J-B1", "J-R1")


def test_gr_k11_forger_decline_and_nothing_to_swap() -> None:
    """GR-K11: forger decline and nothing to swap."""
    s = table(2, hands={0: [FORGER, CON]}, jobs={0: ["J-R1"], 1: ["J-B1"]})
    s, _ = act(s, caper(FORGER))
    s, events = act(s, answer(JOB_SWAP, None))
    assert "job_swap_declined" in kinds(events) and s.players[0].jobs == ("J-R1",)
    s = table(2, hands={0: [FORGER, CON]}, jobs={1: ["J-B1"]})
    s, events = act(s, caper(FORGER))
    assert not s.choice and s.players[0].nights[0] == (FORGER,)


def test_gr_k12_fixer_returns_a_whole_night_space_to_hand() -> None:
    """GR-K12: fixer returns a whole night space to hand."""
    s = table(2, hands={0: [FIXER, CON]}, nights={0: [[], [MIDDLE, THUG], [sp(9, 1)]]})
    s, _ = act(s, caper(FIXER))
    assert s.choice == NIGHT
    assert [c.return_night.night for c in ENGINE.legal_commands(s, 0)] == [2, 3]
    s, events = act(s, answer(NIGHT, 2))
    assert MIDDLE in s.players[0].hand and THUG in s.players[0].hand
    assert s.players[0].nights[0] == (FIXER,)


def test_gr_k13_con_artist_steals_three() -> None:
    """GR-K13: con artist steals three."""
    s = table(2, hands={0: [CON, "R0-TH"]}, coffers=30)
    s, _ = act(s, caper(CON))
    assert s.coffers == 27


def test_gr_k14_wheelman_advances_time_then_goes_onto_night_one() -> None:
    """GR-K14: wheelman advances time then goes onto night one."""
    s = table(2, hands={0: [WHEEL, CON]}, nights={0: [[MIDDLE], [], [THUG]]})
    s, _ = act(s, caper(WHEEL))
    p = s.players[0]
    assert p.nights == ((WHEEL,), (MIDDLE,), ()) and THUG in p.hand  # refreshed in Phase 3


def test_gr_k15_femme_fatale_second_caper_after_an_extra_advance() -> None:
    """GR-K15: femme fatale second caper after an extra advance."""
    s = table(2, hands={0: [FEMME, CON, "R0-TH"]}, nights={0: [[], [MIDDLE], []]}, coffers=30)
    s, events = act(s, caper(FEMME))
    assert s.choice == SECOND and s.players[0].nights[0] == (FEMME,)
    cmds = ENGINE.legal_commands(s, 0)
    assert cmds[0].WhichOneof("kind") == "decline_second_caper"
    s, events = act(s, answer(SECOND, CON))
    assert s.players[0].nights == ((CON,), (FEMME,), (MIDDLE,)) and s.coffers == 27


def test_gr_k15_declining_the_second_caper_means_no_extra_advance() -> None:
    """GR-K15: declining the second caper means no extra advance."""
    s = table(2, hands={0: [FEMME, CON]}, nights={0: [[], [MIDDLE], []]})
    s, _ = act(s, caper(FEMME))
    s, events = act(s, answer(SECOND, None))
    assert "time_advanced" not in kinds(events)
    assert s.players[0].nights == ((FEMME,), (MIDDLE,), ())


def test_gr_k16_smuggler_steals_two_then_draws_one() -> None:
    """GR-K16: smuggler steals two then draws one."""
    s = table(2, hands={0: [SMUGGLER, CON]}, coffers=30)
    s, events = act(s, caper(SMUGGLER))
    k = kinds(events)
    assert k.index("isk_stolen") < k.index("card_drawn") and s.coffers == 28


@pytest.mark.parametrize(("refresh", "steal"), [(0, 1), (2, 2), (5, 4)])
def test_gr_k17_cat_burglar_steals_per_refresh_card_between_one_and_four(refresh: int, steal: int) -> None:
    """GR-K17: cat burglar steals per refresh card between one and four."""
    cards = [sp(n, 1) for n in (2, 3, 4, 5, 6)][:refresh]
    # as if this turn's Phase 1 had just moved the cards into the Refresh area
    s = table(2, hands={0: [CAT, "R0-TH"]}, refresh={0: cards}, coffers=30)
    s, events = act(s, caper(CAT))
    assert of_kind(events, "isk_stolen")[0].amount == steal


def test_gr_k18_thug_with_partner_steals_per_lone_card_of_the_partners_skill() -> None:
    """GR-K18: thug with partner steals per lone card of the partners skill."""
    s = table(3, hands={0: [THUG, "R0-TH", "R0-MM"]}, stash={1: 5, 2: 5},
              nights={1: [[CON], [sp(9, 1), sp(6, 2)], [WHEEL]], 2: [[MIDDLE], [sp(10, 1)], []]})
    s, _ = act(s, caper(THUG))
    assert s.choice == PARTNER
    assert [c.choose_partner.card for c in ENGINE.legal_commands(s, 0)] == ["R0-MM", "R0-TH"]
    s, events = act(s, answer(PARTNER, "R0-TH"))  # SPEED
    stolen = [(e.victim, e.amount) for e in of_kind(events, "isk_stolen")]
    assert stolen == [(1, 2), (2, 1)]  # the SPEED Team on seat 1's Night Two does not count
    assert of_kind(events, "caper_completed")[0].placed == [THUG, "R0-TH"]


def test_gr_k18_thug_alone_steals_nothing() -> None:
    """GR-K18: thug alone steals nothing."""
    s = table(2, hands={0: [THUG]}, nights={1: [[CON], [], []]})
    s, events = act(s, caper(THUG))
    assert "isk_stolen" not in kinds(events) and s.players[0].nights[0] == (THUG,)


def test_gr_k19_middle_man_steals_one_from_each_opponent() -> None:
    """GR-K19: middle man steals one from each opponent."""
    s = table(4, hands={0: [MIDDLE, CON]}, stash={1: 1, 2: 0, 3: 4})
    s, events = act(s, caper(MIDDLE))
    assert [(e.victim, e.amount) for e in of_kind(events, "isk_stolen")] == [(1, 1), (3, 1)]


def test_gr_k20_fall_guy_is_asked_even_with_one_option_and_never_copies_a_fall_guy() -> None:
    """GR-K20: fall guy is asked even with one option and never copies a fall guy."""
    s = table(2, hands={0: [FALL, sp(13, 2), CON]})
    s, _ = act(s, caper(FALL))
    assert s.choice == COPY
    assert [c.copy_caper.card for c in ENGINE.legal_commands(s, 0)] == [CON]
    with pytest.raises(RuleViolation) as exc:
        act(s, answer(COPY, sp(13, 2)))
    assert exc.value.code == "GR-K20"


def test_gr_k20_fall_guy_copying_a_thug_cannot_take_the_copied_thug_as_partner() -> None:
    """GR-K20: fall guy copying a thug cannot take the copied thug as partner."""
    s = table(2, hands={0: [FALL, THUG, CON]})
    s, _ = act(s, caper(FALL))
    s, events = act(s, answer(COPY, THUG))
    # the only partner left is the Con Artist: chosen without asking
    assert of_kind(events, "partner_chosen")[0].card == CON
    assert THUG in s.players[0].hand and s.players[0].nights[0] == (FALL, CON)


def test_gr_k20_fall_guy_with_nothing_to_copy_does_nothing() -> None:
    """GR-K20: fall guy with nothing to copy does nothing."""
    s = table(2, hands={0: [FALL]})
    s, events = act(s, caper(FALL))
    assert "caper_copied" not in kinds(events) and s.players[0].nights[0] == (FALL,)


def test_gr_k21_kidnapper_takes_one_card_out_of_a_team() -> None:
    """GR-K21: kidnapper takes one card out of a team."""
    s = table(2, hands={0: [KIDNAP, "R0-TH"]}, nights={1: [[], [CON, "R1-TH"], []]})
    s, events = act(s, caper(KIDNAP))
    assert of_kind(events, "specialist_kidnapped")[0].card == CON
    assert CON in s.players[0].hand and s.players[1].nights[2] == ("R1-TH",)


def test_gr_k22_enforcer_steals_three_from_one_opponent() -> None:
    """GR-K22: enforcer steals three from one opponent."""
    s = table(2, hands={0: [ENFORCER, CON]}, stash={0: 0, 1: 5})
    s, _ = act(s, caper(ENFORCER))
    assert s.players[0].stash == 3 and s.players[1].stash == 2


def test_gr_k23_hitman_discards_a_specialist_face_up() -> None:
    """GR-K23: hitman discards a specialist face up."""
    s = table(3, hands={0: [HITMAN, CON]}, nights={1: [[MIDDLE, "R1-TH"], [], []], 2: [[], [], [WHEEL]]})
    s, _ = act(s, caper(HITMAN))
    cmds = ENGINE.legal_commands(s, 0)
    assert [(c.hit_specialist.opponent, c.hit_specialist.card) for c in cmds] == [(1, MIDDLE), (2, WHEEL)]
    s, events = act(s, cmds[0])
    assert s.discard == (MIDDLE,) and s.players[1].nights[1] == ("R1-TH",)


def test_gr_k15_without_first_turn_extra_advance_no_second_caper_is_offered() -> None:
    """GR-K15, GR-R15, GR-F01 extra_advance_on_first_turn=false: Night One would still be taken."""
    s = table(2, hands={0: [FEMME, CON]}, had_turn=False, options={"extra_advance_on_first_turn": "false"})
    s, events = act(s, caper(FEMME))
    assert "choice_opened" not in kinds(events) and s.players[0].nights[0] == (FEMME,)
    s = table(2, hands={0: [WHEEL, CON]}, nights={0: [[MIDDLE], [], []]}, had_turn=False,
              options={"extra_advance_on_first_turn": "false"})
    s, events = act(s, caper(WHEEL))
    assert of_kind(events, "time_advanced")[0].skipped
