"""Hidden information (GR-H01..GR-H11) and decisions (GR-D01..GR-D08)."""

from __future__ import annotations

import pytest
from google.protobuf import text_format

from famiglia.engine import PUBLIC, SERVER_ONLY, DecisionKind, MatchConfig, RuleViolation, VisibilityKind
from famiglia.rules.grifters import ENGINE
from famiglia.rules.grifters.state import ABDUCT, COPY, JOB_SWAP, KEEP, NIGHT, OPPONENT, PARTNER, SECOND

from ._helpers import (
    CON,
    ENFORCER,
    FALL,
    FEMME,
    FIXER,
    FORGER,
    HITMAN,
    IM,
    KIDNAP,
    MIDDLE,
    THUG,
    WHEEL,
    act,
    answer,
    caper,
    kinds,
    new_game,
    of_kind,
    sp,
    table,
)


def test_gr_h01_h03_h04_public_facts_are_in_every_view() -> None:
    """GR-H01, GR-H03, GR-H04: public facts are in every view."""
    s = table(3, hands={0: [CON, "R0-TH"]}, nights={1: [[MIDDLE, THUG], [], []]}, tokens={2: [False, True, False]},
              stash={1: 7}, jobs={2: ["J-R1"]})
    v = ENGINE.view(s, None)
    assert v.coffers == s.coffers and v.deck_size == len(s.deck) and v.first_player == s.first_player
    assert v.players[1].stash == 7 and list(v.players[1].nights[0].cards) == [MIDDLE, THUG]
    assert v.players[2].nights[1].token and list(v.players[2].jobs) == ["J-R1"]
    assert [list(st.jobs) for st in v.stacks] == [list(j) for _, j in s.stacks]
    assert v.players[0].hand_size == 2 and v.choice.choice == "play" and v.choice.seat == 0


def test_gr_h02_a_seat_sees_only_its_own_hand() -> None:
    """GR-H02: a seat sees only its own hand."""
    s = new_game(3)
    for viewer in range(3):
        v = ENGINE.view(s, viewer)
        for pv in v.players:
            assert (list(pv.hand) == list(s.players[pv.seat].hand)) if pv.seat == viewer else not pv.hand
            assert pv.hand_size == 6


def test_gr_h05_the_deck_order_is_server_only() -> None:
    """GR-H05: the deck order is server only."""
    events = ENGINE.setup(MatchConfig(2, {}), 3)
    assert ENGINE.visibility(events[1]) == SERVER_ONLY and ENGINE.redact(events[1], 0) is None
    v = ENGINE.view(new_game(2), 0)
    assert not v.deck and v.deck_size == 42


def test_gr_h05_h06_reshuffle_is_public_its_order_is_not() -> None:
    """GR-H05, GR-H06: reshuffle is public its order is not."""
    s = table(2, hands={0: [sp(2, 1), CON]}, deck=[], discard=[sp(6, 2), sp(6, 3)])
    _, events = act(s, caper(sp(2, 1)))
    vis = {e.WhichOneof("kind"): ENGINE.visibility(e).kind for e in events}
    assert vis["discard_reshuffled"] is VisibilityKind.PUBLIC and vis["deck_shuffled"] is VisibilityKind.SERVER


def test_gr_h05_the_reshuffled_cards_stay_in_every_view() -> None:
    """GR-H05: after a reshuffle the deck's contents are public knowledge (they were the public
    discard pile). DiscardReshuffled names only their count and the discard pile is empty after
    it, so the View (all a reconnecting client has) must say which cards the deck came from."""
    s = table(2, hands={0: [sp(2, 1), CON]}, deck=[], discard=[sp(9, 1), sp(6, 3), sp(6, 2)])
    assert not ENGINE.view(s, None).reshuffled
    s, _ = act(s, caper(sp(2, 1)))  # Recruiter: draw 2 from the reshuffled three
    for viewer in (None, 0, 1):
        v = ENGINE.view(s, viewer)
        assert not v.discard and v.deck_size == 1
        assert list(v.reshuffled) == [sp(6, 2), sp(6, 3), sp(9, 1)]  # canonical order, as a set
        assert not v.deck  # the order stays the server's (GR-H05)


def test_gr_h06_the_mastermind_discards_and_hitman_victims_are_public() -> None:
    """GR-H06: the mastermind discards and hitman victims are public."""
    s = table(2, hands={0: ["R0-MM", CON]}, deck=[sp(6, 2), sp(6, 3), sp(9, 1), sp(9, 2)])
    s, _ = act(s, caper("R0-MM"))
    s, events = act(s, answer(KEEP, sp(6, 3)))
    assert ENGINE.visibility(of_kind_event(events, "cards_discarded")) == PUBLIC
    assert list(ENGINE.view(s, 1).discard) == [sp(6, 2), sp(9, 1)]
    s = table(2, hands={0: [HITMAN, CON]}, nights={1: [[MIDDLE], [], []]})
    s, _ = act(s, caper(HITMAN))
    assert list(ENGINE.view(s, None).discard) == [MIDDLE]


def of_kind_event(events, kind):  # type: ignore[no-untyped-def]
    return next(e for e in events if e.WhichOneof("kind") == kind)


def test_gr_h07_a_drawn_card_is_seen_only_by_its_drawer() -> None:
    """GR-H07: a drawn card is seen only by its drawer."""
    s = table(2, hands={0: [sp(2, 1), CON]})
    _, events = act(s, caper(sp(2, 1)))
    drawn = of_kind_event(events, "card_drawn")
    assert ENGINE.visibility(drawn).kind is VisibilityKind.PRIVATE and ENGINE.visibility(drawn).seats == {0}
    assert ENGINE.redact(drawn, 0) == drawn
    other = ENGINE.redact(drawn, 1)
    assert other is not None and other.card_drawn.seat == 0 and other.card_drawn.card == ""


def test_gr_h08_played_and_copied_cards_are_named_in_public_events() -> None:
    """GR-H08: played and copied cards are named in public events."""
    s = table(2, hands={0: [FALL, CON]})
    s, events = act(s, caper(FALL))
    assert ENGINE.visibility(events[0]) == PUBLIC and events[0].caper_pulled.card == FALL
    s, events = act(s, answer(COPY, CON))
    assert ENGINE.visibility(of_kind_event(events, "caper_copied")) == PUBLIC


def test_gr_h09_hand_options_of_a_choice_reach_only_the_chooser() -> None:
    """GR-H09: hand options of a choice reach only the chooser."""
    s = table(2, hands={0: ["R0-MM", CON]}, deck=[sp(6, 2), sp(6, 3), sp(9, 1), sp(9, 2)])
    s, _ = act(s, caper("R0-MM"))
    assert list(ENGINE.view(s, 0).choice.drawn) == [sp(6, 2), sp(6, 3), sp(9, 1)]
    assert not ENGINE.view(s, 1).choice.drawn and ENGINE.view(s, 1).choice.choice == KEEP
    assert ENGINE.legal_commands(s, 1) == []


def test_gr_h10_spectators_see_public_information_only() -> None:
    """GR-H10: spectators see public information only."""
    v = ENGINE.view(new_game(4), None)
    assert v.viewer == -1 and all(not pv.hand for pv in v.players)


def test_gr_h11_everything_is_public_at_the_end() -> None:
    """GR-H11: everything is public at the end."""
    s = table(2, hands={0: ["R0-TH", CON]}, coffers=2)
    s, _ = act(s, caper("R0-TH"))
    assert s.over
    for viewer in (None, 1):
        v = ENGINE.view(s, viewer)
        assert list(v.players[0].hand) == [CON] and len(v.deck) == len(s.deck)


def test_gr_d01_only_the_active_player_decides() -> None:
    """GR-D01: only the active player decides."""
    s = table(3, hands={0: [CON, "R0-TH"]}, active=0)
    pend = ENGINE.pending(s)
    assert [(p.seat, p.kind, p.label) for p in pend] == [(0, DecisionKind.TURN, "play")]
    for seat in (1, 2):
        assert ENGINE.legal_commands(s, seat) == []
        with pytest.raises(RuleViolation) as exc:
            act(s, caper(CON), seat=seat)
        assert exc.value.code == "GR-D01"


def test_gr_d02_only_a_caper_or_a_job_answers_the_play_decision() -> None:
    """GR-D02: only a caper or a job answers the play decision."""
    s = table(2, hands={0: [CON, "R0-TH"]})
    with pytest.raises(RuleViolation) as exc:
        act(s, answer(OPPONENT, 1))
    assert exc.value.code == "GR-D07"


@pytest.mark.parametrize(("hand", "nights", "choice", "default"), [
    ([ENFORCER, CON], {}, OPPONENT, "rob_opponent { opponent: 2 }"),
    (["R0-MM", CON], {}, KEEP, None),
    ([IM, CON], {1: [[MIDDLE], [sp(9, 1)], []], 2: [[THUG], [], []]}, ABDUCT, "opponent: 1 card: \"SP12-1\""),
    ([FORGER, CON], {}, JOB_SWAP, "decline_job_swap"),
    ([FIXER, CON], {0: [[], [MIDDLE], [THUG]]}, NIGHT, "night: 2"),
    ([THUG, CON, "R0-TH"], {}, PARTNER, "card: \"R0-TH\""),
    ([FALL, CON, "R0-TH"], {}, COPY, "card: \"R0-TH\""),
    ([FEMME, CON], {}, SECOND, "decline_second_caper"),
])
def test_gr_d03_every_choice_has_its_default(hand, nights, choice, default) -> None:  # type: ignore[no-untyped-def]
    """GR-D03: every follow-up choice has its timeout default, a legal command."""
    s = table(3, hands={0: hand}, nights=nights, stash={1: 2, 2: 5}, jobs={0: ["J-R1"], 1: ["J-B1"]})
    s, _ = act(s, caper(hand[0]))
    assert s.choice == choice
    cmd = ENGINE.timeout_command(s, 0)
    if default is not None:
        assert default in text_format.MessageToString(cmd, as_one_line=True)
    else:
        assert cmd.keep_card.card == s.caper.drawn[0]
    act(s, cmd)
    assert [p.timeout_seconds for p in ENGINE.pending(s)] == [30.0]


def test_gr_d04_single_options_are_automatic_unless_disabled() -> None:
    """GR-D04: single options are automatic unless disabled."""
    s = table(2, hands={0: [ENFORCER, CON]})
    s, events = act(s, caper(ENFORCER))
    assert "choice_opened" not in kinds(events)
    s = table(2, hands={0: [ENFORCER, CON]}, options={"auto_single_option": "false"})
    s, events = act(s, caper(ENFORCER))
    assert s.choice == OPPONENT


def test_gr_d05_hideout_order_goes_from_the_left_night_one_first_canonical() -> None:
    """GR-D05: hideout order goes from the left night one first canonical."""
    s = table(4, hands={0: [KIDNAP, CON]}, active=0,
              nights={3: [[sp(9, 1)], [], []], 1: [[], [], [sp(6, 3), sp(6, 2)]], 2: [[], [WHEEL], []]})
    s, _ = act(s, caper(KIDNAP))
    order = [(c.kidnap_specialist.opponent, c.kidnap_specialist.card) for c in ENGINE.legal_commands(s, 0)]
    assert order == [(1, sp(6, 2)), (1, sp(6, 3)), (2, WHEEL), (3, sp(9, 1))]


def test_gr_d06_a_play_timeout_plays_the_first_card_with_every_default_at_once() -> None:
    """GR-D06: a play timeout plays the first card with every default at once."""
    s = table(3, hands={0: [FIXER, "R0-MM"]}, nights={0: [[], [MIDDLE], [THUG]]},
              deck=[sp(6, 2), sp(6, 3), sp(9, 1), sp(9, 2)])
    assert ENGINE.pending(s)[0].timeout_seconds == 90.0
    cmd = ENGINE.timeout_command(s, 0)
    assert cmd.pull_caper.card == "R0-MM" and cmd.pull_caper.use_defaults
    s, events = act(s, cmd)
    assert "choice_opened" not in kinds(events) and s.active == 1
    assert of_kind(events, "cards_discarded")[0].cards == [sp(6, 3), sp(9, 1)]


def test_gr_d07_an_illegal_command_changes_nothing() -> None:
    """GR-D07: an illegal command changes nothing."""
    s = table(2, hands={0: [CON, "R0-TH"]})
    before = s
    with pytest.raises(RuleViolation):
        act(s, caper(MIDDLE))
    assert s == before
    with pytest.raises(RuleViolation) as exc:
        act(s, caper(CON), seat=1)
    assert exc.value.code == "GR-D01"


def test_gr_d08_no_negotiation_commands_exist() -> None:
    """GR-D08: no negotiation commands exist."""
    fields = {f.name for f in ENGINE.info.command_type.DESCRIPTOR.oneofs_by_name["kind"].fields}
    assert not {"offer", "accept_offer", "chat", "give_isk"} & fields
    assert ENGINE.info.optional_commands == frozenset()
