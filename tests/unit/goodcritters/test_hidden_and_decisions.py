"""Hidden information (GC-H01 to GC-H13) and decisions (GC-D01 to GC-D10)."""

from __future__ import annotations

import pytest
from google.protobuf import text_format

from famiglia.engine import DecisionKind, MatchConfig, Rng, RuleViolation
from famiglia.rules.goodcritters.data import FUZZ
from famiglia.rules.goodcritters.legal import all_assignments, round_robin
from famiglia.rules.goodcritters.state import Step

from ._helpers import (
    ENGINE,
    GUARD,
    ROB,
    SKIM,
    VOTE_NO,
    VOTE_YES,
    C,
    act,
    assign,
    kinds,
    loot,
    new_game,
    of_kind,
    play_step3,
    round_with,
    table_state,
)


def _text(message: object) -> str:
    return text_format.MessageToString(message, as_one_line=True)  # type: ignore[arg-type]


# -- hidden information --------------------------------------------------------------------------


def test_gc_h01_public_facts_are_in_every_view() -> None:
    """GC-H01: Public facts are in every view."""
    state, _ = assign(table_state(), [1, 1, 2, 2, 3, 3])
    state, _ = act(state, 2, C.place_threat(0))
    state, _ = act(state, 1, C.choose_action_card(ROB))
    for viewer in (None, 0, 3):
        view = ENGINE.view(state, viewer)
        assert view.boss == 0 and view.round == 1 and view.step == Step.ACTIONS
        assert list(view.table) == list(state.table)
        assert [a.seat for a in view.assignments] == [1, 1, 2, 2, 3, 3]
        assert view.seat_views[2].threat_target == 0
        assert [sv.stash_count for sv in view.seat_views] == [4, 4, 4, 4]
        assert view.pile_count == len(state.pile)
        assert view.seat_views[1].has_card and view.seat_views[1].choices == 1


def test_gc_h02_stashes_are_secret() -> None:
    """GC-H02: Stashes are secret."""
    state = new_game(4, seed=5)
    for viewer in range(4):
        view = ENGINE.view(state, viewer)
        text = _text(view)
        for other in range(4):
            for card in state.stashes[other]:
                assert (card in text) == (other == viewer)
    assert all(not sv.stash for sv in ENGINE.view(state, None).seat_views)


def test_gc_h03_stash_counts_are_public_unless_switched_off() -> None:
    """GC-H03: Stash counts are public unless switched off."""
    state = new_game(4, options={"stash_counts_public": "false"})
    view = ENGINE.view(state, 1)
    assert [sv.stash_count for sv in view.seat_views] == [0, 4, 0, 0]
    assert [sv.stash_count for sv in ENGINE.view(new_game(4), 1).seat_views] == [4, 4, 4, 4]


def test_gc_h04_loot_that_entered_a_stash_face_up_stays_in_the_public_log() -> None:
    """GC-H04: Loot that entered a stash face up stays in the public log."""
    before, after, events = round_with([VOTE_YES] * 4, assignment=[2] * 6)
    (handed,) = of_kind(events, "loot_handed_out")
    assert (
        ENGINE.visibility([e for e in events if e.WhichOneof("kind") == "loot_handed_out"][0]).kind.name
        == "PUBLIC"
    )
    assert [a.card for a in handed.assignments] == list(before.table)
    # but the view keeps no record of which of them are still there
    assert not ENGINE.view(after, 0).seat_views[2].stash


def test_gc_h05_gc_h06_a_chosen_card_is_known_only_to_its_owner_until_revealed() -> None:
    """GC-H05, GC-H06: A chosen card is known only to its owner until revealed."""
    state, _ = assign(table_state())
    state, events = act(state, 2, C.choose_action_card(GUARD))
    (event,) = events
    assert ENGINE.visibility(event).seats == frozenset({2})
    redacted = ENGINE.redact(event, 1)
    assert redacted is not None and redacted.action_card_chosen.card == 0
    assert redacted.action_card_chosen.choices == 1
    assert ENGINE.view(state, 2).seat_views[2].chosen_card == GUARD
    assert ENGINE.view(state, 1).seat_views[2].chosen_card == 0
    # a change shows only as one more choice
    state, _ = act(state, 2, C.choose_action_card(GUARD))
    assert ENGINE.view(state, 1).seat_views[2].choices == 2
    # GC-H05: every played card is revealed in Step 4
    state, events = play_step3(state, {0: VOTE_YES, 1: VOTE_YES, 2: GUARD, 3: VOTE_NO})
    assert [r.card for r in of_kind(events, "action_revealed")] == [VOTE_YES, VOTE_YES, GUARD, VOTE_NO]


def test_gc_h07_the_pile_order_and_the_fuzz_are_server_only() -> None:
    """GC-H07: The pile order and the fuzz are server only."""
    events = ENGINE.setup(MatchConfig(4), 3)
    (stacked,) = [e for e in events if e.WhichOneof("kind") == "pile_stacked"]
    assert ENGINE.visibility(stacked).kind.name == "SERVER"
    assert all(ENGINE.redact(stacked, v) is None for v in (None, 0, 1, 2, 3))
    state = new_game(4, seed=3)
    view = ENGINE.view(state, 0)
    assert not view.pile and view.fuzz_position == -1
    assert (view.fuzz_min_above, view.fuzz_max_above) == (62, 82)  # public knowledge
    assert FUZZ not in _text(view)


def test_gc_h08_threats_and_table_are_face_up() -> None:
    """GC-H08: Threats and table are face up."""
    state, _ = assign(table_state())
    state, events = act(state, 3, C.place_threat(1))
    assert ENGINE.visibility(events[0]).kind.name == "PUBLIC"
    assert ENGINE.view(state, None).seat_views[3].threat_target == 1
    assert list(ENGINE.view(state, None).table) == list(state.table)


def test_gc_h09_only_the_skimmer_sees_the_skimmed_card() -> None:
    """GC-H09: Only the skimmer sees the skimmed card."""
    _, _, events = round_with([VOTE_YES, SKIM, VOTE_YES, VOTE_YES])
    (event,) = [e for e in events if e.WhichOneof("kind") == "loot_skimmed"]
    assert ENGINE.visibility(event).seats == frozenset({1})
    redacted = ENGINE.redact(event, 0)
    assert redacted is not None and redacted.loot_skimmed.seat == 1 and not redacted.loot_skimmed.card


def test_gc_h10_only_robber_and_victim_see_the_stolen_card() -> None:
    """GC-H10: Only robber and victim see the stolen card."""
    _, _, events = round_with([VOTE_YES, ROB, VOTE_YES, VOTE_YES], threats={1: 3})
    (event,) = [e for e in events if e.WhichOneof("kind") == "loot_stolen"]
    assert ENGINE.visibility(event).seats == frozenset({1, 3})
    redacted = ENGINE.redact(event, 2)
    assert redacted is not None
    assert (redacted.loot_stolen.thief, redacted.loot_stolen.victim) == (1, 3)
    assert not redacted.loot_stolen.card and not redacted.loot_stolen.nothing


def test_gc_h05_the_round_just_played_stays_in_every_view() -> None:
    """GC-H05, GC-H01: every revealed card, the locked threats and the vote are public. Step 4 and
    the clean-up run inside the last commit, so the View after it (all a reconnecting client
    has) must still show the round just played: it showed no card, threat or vote at all."""
    before, after, _ = round_with([VOTE_YES, VOTE_NO, ROB, VOTE_NO], threats={2: 0})
    assert not ENGINE.view(before, None).HasField("last_vote")
    assert after.round == 2 and after.step is Step.DISTRIBUTE  # failed: a new round at Step 2
    for viewer in (None, 0, 2, 3):
        view = ENGINE.view(after, viewer)
        assert [sv.revealed_card for sv in view.seat_views] == [0, 0, 0, 0]  # the new round's
        vote = view.last_vote
        assert (vote.round, vote.boss) == (1, 0)  # the failed vote made seat 1 Boss (GC-V04)
        assert view.boss == 1
        assert list(vote.cards) == [VOTE_YES, VOTE_NO, ROB, VOTE_NO]
        assert list(vote.threats) == [-1, -1, 0, -1]
        assert (vote.yes, vote.no, vote.outcome) == (1, 2, 3)  # VOTE_OUTCOME_FAILED


def test_gc_h13_a_game_a_skimmed_fuzz_ended_still_shows_its_last_round() -> None:
    """GC-E03, GC-H13: the round of the Skim is played out and cleaned up before the game ends;
    the finished View still shows what everybody played in it."""
    _, after, _ = round_with([SKIM, VOTE_YES, GUARD, VOTE_NO], pile=(FUZZ,) + loot(23, 24))
    assert after.over
    vote = ENGINE.view(after, None).last_vote
    assert (vote.round, list(vote.cards)) == (1, [SKIM, VOTE_YES, GUARD, VOTE_NO])
    assert (vote.yes, vote.no, vote.outcome) == (1, 1, 2)  # VOTE_OUTCOME_TIED


def test_gc_h11_no_view_shows_another_stash_value_before_the_end() -> None:
    """GC-H11: No view shows another stash value before the end."""
    state = new_game(4, seed=2)
    view = ENGINE.view(state, 0)
    fields = set(type(view.seat_views[0]).DESCRIPTOR.fields_by_name) | set(
        type(view).DESCRIPTOR.fields_by_name
    )
    assert not {f for f in fields if "score" in f or "value" in f or "total" in f}
    assert all(not sv.stash for sv in view.seat_views[1:])


def test_gc_h12_spectators_see_public_information_only() -> None:
    """GC-H12: Spectators see public information only."""
    state, _ = assign(table_state())
    state, _ = act(state, 1, C.choose_action_card(ROB))
    view = ENGINE.view(state, None)
    assert view.viewer == -1
    assert all(not sv.stash and sv.chosen_card == 0 for sv in view.seat_views)
    (event,) = ENGINE.decide(state, 2, C.choose_action_card(SKIM), Rng(0))
    assert ENGINE.redact(event, None).action_card_chosen.card == 0


def test_gc_h13_after_the_end_everything_is_public() -> None:
    """GC-H13: After the end everything is public."""
    pile = loot(20) + (FUZZ,) + loot(23)
    _, after, _ = round_with([VOTE_YES] * 4, pile=pile)
    view = ENGINE.view(after, None)
    assert [list(sv.stash) for sv in view.seat_views] == [list(s) for s in after.stashes]
    assert list(view.pile) == ["L023"]
    assert view.fuzz_position == 1  # the Loot cards it had above it at setup (L020)


# -- decisions ---------------------------------------------------------------------------------


def test_gc_d01_pending_names_the_boss_then_every_uncommitted_player() -> None:
    """GC-D01: Pending names the boss then every uncommitted player."""
    state = table_state(boss=2)
    (p,) = ENGINE.pending(state)
    assert (p.seat, p.kind) == (2, DecisionKind.DISTRIBUTION)
    state, _ = assign(state)
    assert [p.seat for p in ENGINE.pending(state)] == [0, 1, 2, 3]
    assert {p.kind for p in ENGINE.pending(state)} == {DecisionKind.SECRET_CHOICE}
    state, _ = act(state, 1, C.choose_action_card(VOTE_YES, commit=True))
    assert [p.seat for p in ENGINE.pending(state)] == [0, 2, 3]


def test_gc_d02_the_timeout_deals_in_table_order_from_the_boss_left() -> None:
    """GC-D02: The timeout deals in table order from the boss left."""
    state = table_state(5, boss=2, table=loot(61, 62, 63, 64, 65, 66, 67))
    assert [s for _, s in round_robin(state)] == [3, 4, 0, 1, 2, 3, 4]
    command = ENGINE.timeout_command(state, 2)
    assert command is not None
    state, _ = act(state, 2, command)
    assert state.assignment == (3, 4, 0, 1, 2, 3, 4)
    assert ENGINE.pending(table_state())[0].timeout_seconds == 90


def test_gc_d02_the_boss_may_submit_any_split_and_legal_commands_samples_them() -> None:
    """GC-D02: The boss may submit any split and legal commands samples them."""
    state = table_state()
    commands = ENGINE.legal_commands(state, 0, limit=8)
    assert 1 <= len(commands) <= 8
    for command in commands:
        ENGINE.decide(state, 0, command, Rng(0))
    small = table_state(table=loot(61, 62))
    splits = list(all_assignments(small))
    assert len(splits) == 16
    for split in splits:
        ENGINE.decide(small, 0, C.assign_loot(split), Rng(0))


def test_gc_d03_step_3_has_no_turns_anybody_acts_in_any_order() -> None:
    """GC-D03: Step 3 has no turns anybody acts in any order."""
    state, _ = assign(table_state())
    state, _ = act(state, 3, C.place_threat(0))
    state, _ = act(state, 1, C.choose_action_card(SKIM))
    state, _ = act(state, 3, C.choose_action_card(ROB))
    state, _ = act(state, 0, C.place_threat(3))
    assert state.step is Step.ACTIONS


def test_gc_d04_step_3_closes_when_all_are_committed_and_public_changes_release() -> None:
    """GC-D04: Step 3 closes when all are committed and public changes release."""
    state, _ = assign(table_state())
    with pytest.raises(RuleViolation) as exc:
        act(state, 0, C.commit())
    assert exc.value.code == "GC-D04"  # no card yet
    for seat in (0, 1, 2):
        state, _ = act(state, seat, C.choose_action_card(VOTE_YES, commit=True))
    state, _ = act(state, 3, C.place_threat(0))
    assert state.committed == (False, False, False, False)
    for seat in (0, 1, 2):
        state, _ = act(state, seat, C.commit())
    with pytest.raises(RuleViolation) as exc:
        act(state, 0, C.commit())
    assert exc.value.code == "GC-D04"
    with pytest.raises(RuleViolation) as exc:
        act(state, 0, C.choose_action_card(SKIM))
    assert exc.value.code == "GC-D04"
    state, _ = act(state, 0, C.change_action_card(SKIM))  # takes the commitment back
    assert not state.committed[0]
    state, _ = act(state, 0, C.commit())
    state, events = act(state, 3, C.choose_action_card(VOTE_YES, commit=True))
    assert "actions_locked" in kinds(events)


def _revealed_at_the_deadline(**options: str) -> dict[int, int]:
    """Seat 1 chose Rob; every seat's Step 3 deadline then passes: the cards revealed, by seat."""
    state, _ = assign(table_state(options=options or None))
    state, _ = act(state, 1, C.choose_action_card(ROB))
    assert ENGINE.pending(state)[0].timeout_seconds == 120
    events = []
    for seat in range(4):
        command = ENGINE.timeout_command(state, seat)
        assert command is not None
        state, evs = act(state, seat, command)
        events += evs
    return {r.seat: r.card for r in of_kind(events, "action_revealed")}


def test_gc_d05_the_step_3_deadline_commits_and_plays_vote_yes_for_an_empty_hand() -> None:
    """GC-D05: The step 3 deadline commits and plays vote yes for an empty hand."""
    assert _revealed_at_the_deadline() == {0: VOTE_YES, 1: ROB, 2: VOTE_YES, 3: VOTE_YES}


def test_gc_d05_gc_k01_the_deadline_plays_the_configured_timeout_action() -> None:
    """GC-D05, GC-K01: `timeout_defaults.action` names the card a player with none chosen plays
    at the deadline; a chosen card still stands."""
    assert _revealed_at_the_deadline(**{"timeout_defaults.action": "vote_no"}) == \
        {0: VOTE_NO, 1: ROB, 2: VOTE_NO, 3: VOTE_NO}


def test_gc_d06_turn_mode_step_3a_then_3b() -> None:
    """GC-D06: Turn mode step 3a then 3b."""
    state = table_state(boss=1, options={"step3_mode": "turns"})
    state, _ = assign(state)
    assert state.step is Step.THREAT_TURNS and state.turn == 1
    (p,) = ENGINE.pending(state)
    assert (p.seat, p.kind, p.timeout_seconds) == (1, DecisionKind.TURN, 30)
    with pytest.raises(RuleViolation) as exc:
        act(state, 2, C.place_threat(0))
    assert exc.value.code == "GC-D06"
    with pytest.raises(RuleViolation):
        act(state, 1, C.choose_action_card(SKIM))  # no cards in Step 3a
    state, _ = act(state, 1, C.place_threat(3))
    state, _ = act(state, 1, C.end_turn())
    assert state.turn == 2
    for seat in (2, 3):
        state, _ = act(state, seat, ENGINE.timeout_command(state, seat))
    assert state.turn == 0
    state, _ = act(state, 0, C.end_turn())
    assert state.step is Step.CARD_CHOICE
    assert ENGINE.pending(state)[0].timeout_seconds == 60
    with pytest.raises(RuleViolation):
        act(state, 0, C.place_threat(1))  # threats are locked in Step 3b
    state, events = play_step3(state, [VOTE_YES] * 4)
    assert "vote_counted" in kinds(events)


def test_gc_d06_a_turn_ends_by_itself_when_no_public_change_is_left() -> None:
    """GC-D06: A turn ends by itself when no public change is left."""
    state = table_state(options={"step3_mode": "turns", "step3_public_change_limit": "1"})
    state, _ = assign(state)
    state, events = act(state, 0, C.place_threat(2))
    assert "turn_ended" in kinds(events) and state.turn == 1
    zero = table_state(options={"step3_mode": "turns", "step3_public_change_limit": "0"})
    zero, _ = assign(zero)
    assert zero.step is Step.CARD_CHOICE


def test_gc_d07_offers_and_gifts_never_make_anyone_pending() -> None:
    """GC-D07: Offers and gifts never make anyone pending."""
    options = {"payoff.enabled": "true"}
    state, _ = assign(table_state(options=options))
    state, _ = act(state, 0, C.make_offer(1, 1, [], 1, 1))
    assert [p.seat for p in ENGINE.pending(state)] == [0, 1, 2, 3]
    state, _ = act(state, 2, C.give_gift(1, [], 1, True))
    assert all(p.kind is DecisionKind.SECRET_CHOICE for p in ENGINE.pending(state))


def test_gc_d08_only_the_rules_are_enforced_no_promise_is_recorded() -> None:
    """GC-D08: Only the rules are enforced no promise is recorded."""
    # the command vocabulary has no promise, chat or acceptance: only rule moves
    names = set(ENGINE.info.command_type.DESCRIPTOR.fields_by_name)
    assert not {n for n in names if "promise" in n or "chat" in n or "accept" in n}


def test_gc_d09_public_changes_are_capped_per_round() -> None:
    """GC-D09: Public changes are capped per round."""
    state, _ = assign(table_state())
    for target in (1, 2, 3):
        state, _ = act(state, 0, C.place_threat(target))
    with pytest.raises(RuleViolation) as exc:
        act(state, 0, C.withdraw_threat())
    assert exc.value.code == "GC-D09"
    assert not any(c.WhichOneof("kind") == "place_threat" for c in ENGINE.legal_commands(state, 0))
    state, _ = act(state, 0, C.choose_action_card(VOTE_YES, commit=True))  # cards remain open


def test_gc_d10_card_choices_are_capped_and_the_last_card_stays() -> None:
    """GC-D10: Card choices are capped and the last card stays."""
    state, _ = assign(table_state(options={"step3_card_choice_limit": "2"}))
    state, _ = act(state, 1, C.choose_action_card(SKIM))
    state, _ = act(state, 1, C.choose_action_card(SKIM))  # the same card again counts
    with pytest.raises(RuleViolation) as exc:
        act(state, 1, C.choose_action_card(ROB))
    assert exc.value.code == "GC-D10"
    kinds_left = {c.WhichOneof("kind") for c in ENGINE.legal_commands(state, 1)}
    assert "choose_action_card" not in kinds_left and "commit" in kinds_left
    assert ENGINE.view(state, 3).seat_views[1].choices == 2
    state, _ = act(state, 1, C.commit())
    assert state.cards[1] == SKIM


def test_gc_d01_a_limit_never_cuts_off_the_moves_that_advance_the_game() -> None:
    """GC-D01: non-optional commands come first, so `legal_commands(limit=1)` still has one."""
    optional = ENGINE.info.optional_commands
    for state in (table_state(), assign(table_state())[0]):
        for seat in {p.seat for p in ENGINE.pending(state)}:
            (command,) = ENGINE.legal_commands(state, seat, limit=1)
            assert command.WhichOneof("kind") not in optional
            ENGINE.decide(state, seat, command, Rng(0))
    state, _ = assign(table_state())
    state, _ = act(state, 0, C.choose_action_card(VOTE_YES, commit=True))
    listed = ENGINE.legal_commands(state, 0)
    assert listed and all(c.WhichOneof("kind") in optional for c in listed)  # committed: optional only
