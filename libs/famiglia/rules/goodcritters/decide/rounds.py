"""The parts of a round nobody decides: Step 1, the opening of Step 3, Step 4, the vote
outcome, the clean-up and the end of the game (GC-R01 to GC-R08, GC-A09 to GC-A10,
GC-V01 to GC-V06, GC-E01 to GC-E05).
"""

from __future__ import annotations

from .. import events as ev
from .. import evolve as fold
from ..data import FUZZ, NOBODY, VOTE_NO, VOTE_YES
from ..effects import EFFECTS, no_effect, resolve_offers
from ..emitter import Emitter
from ..flow import step3_opening
from ..state import DISTRIBUTE, SHOW_LOOT, THREAT_TURNS, Step

# proto enum values
FUZZ_SHOW_LOOT, FUZZ_FAILED_VOTE, FUZZ_SKIM = 1, 2, 3
END_FUZZ_SHOWN, END_FUZZ_FAILED_VOTE, END_FUZZ_SKIMMED, END_PILE_EMPTY = 1, 2, 3, 4
PASSED, TIED, FAILED = 1, 2, 3
BOSS_TIED, BOSS_FAILED = 1, 2
_END_FOR_CAUSE = {FUZZ_SHOW_LOOT: END_FUZZ_SHOWN, FUZZ_FAILED_VOTE: END_FUZZ_FAILED_VOTE}


def end_game(em: Emitter, reason: int) -> None:
    """GC-E01 to GC-E05, GC-E07: table loot is confiscated, then every Stash becomes public."""
    s = em.state
    if s.table:
        em.emit(ev.loot_confiscated(s.table))
    em.emit(ev.game_ended(reason))
    s = em.state
    em.emit(ev.stashes_revealed(s.stashes, s.pile))


def reveal_from_pile(em: Emitter, count: int, cause: int) -> bool:
    """GC-R04, GC-V06: turn up cards one at a time; The Fuzz! or an empty pile (GC-E05)
    ends the game at once. Returns whether the game goes on."""
    for _ in range(count):
        pile = em.state.pile
        if not pile:
            end_game(em, END_PILE_EMPTY)
            return False
        if pile[0] == FUZZ:
            em.emit(ev.fuzz_revealed(cause))
            end_game(em, _END_FOR_CAUSE[cause])
            return False
        em.emit_folded(ev.loot_revealed(pile[0]), fold.loot_revealed(em.state, pile[0]))
    return True


def start_round(em: Emitter, boss: int, show_loot: bool) -> None:
    """GC-R02, GC-R03, GC-R06: a new round at Step 1, or at Step 2 after a failed vote."""
    s = em.state
    step = SHOW_LOOT if show_loot else DISTRIBUTE
    em.emit_folded(ev.round_started(s.round + 1, boss, step), fold.round_started(s, s.round + 1, boss, step))
    if show_loot:
        if not reveal_from_pile(em, s.seats + 2, FUZZ_SHOW_LOOT):  # GC-R04: N + 2 cards
            return
        em.emit_folded(ev.step_started(DISTRIBUTE), fold.step_started(em.state, DISTRIBUTE, NOBODY))


def open_step3(em: Emitter) -> None:
    """GC-R06, GC-D03, GC-D06: Step 3 opens when the assignment is in."""
    s = em.state
    step = step3_opening(s.config)
    if step is Step.THREAT_TURNS:
        em.emit_folded(ev.step_started(step, s.boss), fold.step_started(s, step, s.boss))
        skip_spent_turns(em)
    else:
        em.emit_folded(ev.step_started(step), fold.step_started(s, step, NOBODY))


def skip_spent_turns(em: Emitter) -> None:
    """GC-D06: a turn ends by itself when its player has no public change left; after the
    last turn (the seat to the Boss's right) Step 3b begins."""
    while True:
        s = em.state
        if s.step is not Step.THREAT_TURNS:
            return
        if s.changes[s.turn] < s.config.public_change_limit:
            return
        end_turn(em, s.turn)


def end_turn(em: Emitter, seat: int) -> None:
    s = em.state
    em.emit(ev.turn_ended(seat))
    if s.left_of(seat) == s.boss:
        em.emit(ev.step_started(Step.CARD_CHOICE))


def after_public_change(em: Emitter, seat: int) -> None:
    """GC-D06: in Step 3a the turn ends by itself once the cap of GC-D09 is reached."""
    s = em.state
    if s.step is THREAT_TURNS and s.turn == seat and s.changes[seat] >= s.config.public_change_limit:
        end_turn(em, seat)
        skip_spent_turns(em)


def close_if_all_committed(em: Emitter) -> None:
    """GC-D04: Step 3 closes at the moment when all players are committed."""
    if all(em.state.committed):
        close_step3(em)


def close_step3(em: Emitter) -> None:
    """GC-R06, GC-R08: lock, resolve Step 4, apply the vote, clean up, go on or end."""
    em.emit_folded(ev.actions_locked(), fold.actions_locked(em.state))
    resolve_actions(em)
    outcome = count_votes(em)
    if not apply_outcome(em, outcome):
        return
    s = em.state
    em.emit_folded(ev.round_ended(s.round), fold.round_ended(s))  # GC-R07
    s = em.state
    if s.fuzz_skimmed:
        end_game(em, END_FUZZ_SKIMMED)  # GC-E03, GC-E04
        return
    start_round(em, s.boss, show_loot=outcome != FAILED)


def resolve_actions(em: Emitter) -> None:
    """GC-A09, GC-A10: the Boss first, then clockwise; a Guard already revealed is skipped."""
    s = em.state
    default = s.config.timeout_action
    offers = bool(s.offers)  # offers are made in Step 3 only: none now, none to resolve (GC-P11)
    for seat in s.clockwise_from(s.boss):
        now = em.state
        if now.revealed[seat]:
            continue
        card = now.cards[seat] or default
        em.emit_folded(ev.action_revealed(seat, card), fold.action_revealed(now, seat, card))
        effect = EFFECTS[card]
        if effect is not no_effect:  # the votes and an untargeted Guard do nothing now
            effect(em, seat)
        if offers:
            resolve_offers(em, seat)


def count_votes(em: Emitter) -> int:
    """GC-V01, GC-T04: more Yes passes, equal (none at all included) ties, more No fails."""
    revealed = em.state.revealed
    yes = revealed.count(VOTE_YES)
    no = revealed.count(VOTE_NO)
    outcome = PASSED if yes > no else TIED if yes == no else FAILED
    em.emit_folded(ev.vote_counted(yes, no, outcome), fold.vote_counted(em.state, yes, no, outcome))
    return outcome


def apply_outcome(em: Emitter, outcome: int) -> bool:
    """GC-V02 to GC-V06, GC-E02, GC-E04. Returns whether the round reaches its clean-up."""
    s = em.state
    if outcome != FAILED:
        handed = fold.loot_handed_out(s, zip(s.table, s.assignment, strict=True))
        event = ev.loot_handed_out_wire(ev.split_wire(s.table, s.assignment))
        em.emit_folded(ev.remember_split(event, "LootHandedOut ", s.table, s.assignment), handed)
        if outcome == TIED:
            boss = s.left_of(s.boss)
            em.emit_folded(ev.boss_changed(boss, BOSS_TIED), fold.boss_changed(handed, boss))
        return True
    em.emit_folded(ev.loot_returned(), fold.loot_returned(s))
    if s.fuzz_skimmed and not s.config.skim_fuzz_failed_vote_extra_cards:
        return True  # GC-E04: no new Boss, no extra cards
    boss = new_boss_after_failed_vote(em)
    if boss != s.boss:
        em.emit_folded(ev.boss_changed(boss, BOSS_FAILED), fold.boss_changed(em.state, boss))
    count = s.config.reveal_after_failed_vote
    if s.fuzz_skimmed:
        # skim_fuzz_failed_vote_extra_cards: the cards turn up, and are confiscated with the rest
        for card in em.state.pile[:count]:
            em.emit_folded(ev.loot_revealed(card), fold.loot_revealed(em.state, card))
        return True
    return reveal_from_pile(em, count, FUZZ_FAILED_VOTE)


def new_boss_after_failed_vote(em: Emitter) -> int:
    """GC-V04, GC-V05: the first No voter clockwise from the Boss's left, the Boss last."""
    s = em.state
    for seat in s.clockwise_from(s.left_of(s.boss)):
        if s.revealed[seat] == VOTE_NO:
            return seat
    return s.boss
