"""One function per caper effect code of data.py (GR-K03..GR-K23) and per Job reward part (GR-J07,
GR-J08), with the dicts from code to function.

An effect is called with START when its text begins and again with the answer when a follow-up
choice it opened is answered (GR-C05). It ends by completing the caper, by opening a choice, or by
installing a nested caper (GR-C12), which `decide` then starts: nesting is always a text's last part.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import events as ev
from .data import COFFERS, DRAW, EACH_OPPONENT, JOBS_BY_ID, ONE_OPPONENT, SKILL_OF
from .resolve import ALL_JOBS_DONE, ASKED, SKIP, START, Ctx
from .state import ABDUCT, HIT, JOB_SWAP, KEEP, KIDNAP, NIGHT, OPPONENT, PARTNER, SECOND, Caper
from .state import COPY as COPY_CHOICE

Effect = Callable[[Ctx, Caper, Any], None]


def _rob(ctx: Ctx, c: Caper, answer: Any, amount: int) -> None:
    """Steal `amount` from one opponent (GR-C08)."""
    if answer is START:
        answer = ctx.ask(OPPONENT)
        if answer is ASKED:
            return
    ctx.emit(ev.opponent_chosen(ctx.seat, answer))
    ctx.steal(answer, amount)
    ctx.finish(c.card)


def mastermind(ctx: Ctx, c: Caper, answer: Any) -> None:
    """GR-K04: draw 3, keep 1, discard the other 2 face up in the order drawn (GR-H06)."""
    if answer is START:
        for _ in range(3):
            ctx.draw()
        answer = ctx.ask(KEEP)
        if answer is ASKED:
            return
    drawn = ctx.state.caper.drawn if ctx.state.caper else ()
    ctx.emit(ev.cards_discarded(ctx.seat, [d for d in drawn if d != answer]))
    ctx.finish(c.card)


def thief(ctx: Ctx, c: Caper, answer: Any) -> None:
    """GR-K05."""
    ctx.steal(None, 2)
    ctx.finish(c.card)


def pickpocket(ctx: Ctx, c: Caper, answer: Any) -> None:
    """GR-K06."""
    _rob(ctx, c, answer, 2)


def inside_man(ctx: Ctx, c: Caper, answer: Any) -> None:
    """GR-K08: swap with a Specialist in an opponent's Hideout, then perform its caper (GR-X20)."""
    if answer is START:
        answer = ctx.ask(ABDUCT)
        if answer is ASKED:
            return
        if answer is SKIP:
            ctx.finish(c.card)
            return
    opponent, night, card = answer
    ctx.emit(ev.specialist_abducted(ctx.seat, opponent, night, card, c.card))


def recruiter(ctx: Ctx, c: Caper, answer: Any) -> None:
    """GR-K09."""
    ctx.draw()
    ctx.draw()
    ctx.finish(c.card)


def informant(ctx: Ctx, c: Caper, answer: Any) -> None:
    """GR-K10."""
    ctx.draw()
    ctx.steal(None, 1)
    ctx.finish(c.card)


def forger(ctx: Ctx, c: Caper, answer: Any) -> None:
    """GR-K11, GR-X15: an optional swap of one own Job with one of an opponent's."""
    if answer is START:
        answer = ctx.ask(JOB_SWAP)
        if answer is ASKED:
            return
    if answer is None:
        ctx.emit(ev.job_swap_declined(ctx.seat))
    elif answer is not SKIP:
        own, opponent, theirs = answer
        ctx.emit(ev.jobs_swapped(ctx.seat, own, opponent, theirs))
    ctx.finish(c.card)


def fixer(ctx: Ctx, c: Caper, answer: Any) -> None:
    """GR-K12: the cards of one own Night space go back to hand."""
    if answer is START:
        answer = ctx.ask(NIGHT)
        if answer is ASKED:
            return
    if answer is not SKIP:
        cards = ctx.state.players[ctx.seat].nights[answer - 1]
        ctx.emit(ev.night_returned(ctx.seat, answer, cards))
    ctx.finish(c.card)


def con_artist(ctx: Ctx, c: Caper, answer: Any) -> None:
    """GR-K13."""
    ctx.steal(None, 3)
    ctx.finish(c.card)


def wheelman(ctx: Ctx, c: Caper, answer: Any) -> None:
    """GR-K14: Advance Time once more, then the Wheelman goes onto Night One."""
    ctx.advance_time()
    ctx.finish(c.card)


def femme_fatale(ctx: Ctx, c: Caper, answer: Any) -> None:
    """GR-K15, GR-X11: placed first; then an optional second caper after an extra Advance Time.
    With GR-F01 `extra_advance_on_first_turn` off, a first turn offers no second caper: without the
    Advance Time, Night One would still hold the Femme Fatale (GR-R15)."""
    if answer is START:
        ctx.place((c.card,))
        s = ctx.state
        if not s.players[s.active].had_turn and not s.config.extra_advance_on_first_turn:
            ctx.complete()
            return
        answer = ctx.ask(SECOND)
        if answer is ASKED:
            return
    if answer is None:
        ctx.emit(ev.second_caper_declined(ctx.seat))
    if answer is None or answer is SKIP:
        ctx.complete()
        return
    ctx.emit(ev.caper_pulled(ctx.seat, answer, second=True))
    ctx.advance_time()


def smuggler(ctx: Ctx, c: Caper, answer: Any) -> None:
    """GR-K16."""
    ctx.steal(None, 2)
    ctx.draw()
    ctx.finish(c.card)


def cat_burglar(ctx: Ctx, c: Caper, answer: Any) -> None:
    """GR-K17, GR-X13: 1 per card in the Refresh area, within the configured bounds."""
    cfg = ctx.state.config
    r = len(ctx.state.players[ctx.seat].refresh)
    ctx.steal(None, max(cfg.cat_burglar_min, min(r, cfg.cat_burglar_max)))
    ctx.finish(c.card)


def thug(ctx: Ctx, c: Caper, answer: Any) -> None:
    """GR-K18, GR-X09: with a partner; 1 per lone card of the partner's skill in each opponent's Hideout."""
    if answer is START:
        answer = ctx.ask(PARTNER)
        if answer is ASKED:
            return
        if answer is SKIP:
            ctx.finish(c.card)
            return
    ctx.emit(ev.partner_chosen(ctx.seat, answer))
    skill = SKILL_OF[answer]
    for opponent in ctx.state.opponents(ctx.seat):
        nights = ctx.state.players[opponent].nights
        count = sum(1 for group in nights if len(group) == 1 and SKILL_OF[group[0]] == skill)
        if count:
            ctx.steal(opponent, count)
    ctx.complete((c.card, answer))


def middle_man(ctx: Ctx, c: Caper, answer: Any) -> None:
    """GR-K19."""
    for opponent in ctx.state.opponents(ctx.seat):
        ctx.steal(opponent, 1)
    ctx.finish(c.card)


def fall_guy(ctx: Ctx, c: Caper, answer: Any) -> None:
    """GR-K20, GR-C11: perform the caper of a card that stays in hand, as the Fall Guy's own."""
    if answer is START:
        answer = ctx.ask(COPY_CHOICE)
        if answer is ASKED:
            return
        if answer is SKIP:
            ctx.finish(c.card)
            return
    ctx.emit(ev.caper_copied(ctx.seat, answer, c.card))


def kidnapper(ctx: Ctx, c: Caper, answer: Any) -> None:
    """GR-K21: a Specialist from an opponent's Hideout into hand."""
    if answer is START:
        answer = ctx.ask(KIDNAP)
        if answer is ASKED:
            return
    if answer is not SKIP:
        opponent, night, card = answer
        ctx.emit(ev.specialist_kidnapped(ctx.seat, opponent, night, card))
    ctx.finish(c.card)


def enforcer(ctx: Ctx, c: Caper, answer: Any) -> None:
    """GR-K22."""
    _rob(ctx, c, answer, 3)


def hitman(ctx: Ctx, c: Caper, answer: Any) -> None:
    """GR-K23: a Specialist from an opponent's Hideout onto the discard pile."""
    if answer is START:
        answer = ctx.ask(HIT)
        if answer is ASKED:
            return
    if answer is not SKIP:
        opponent, night, card = answer
        ctx.emit(ev.specialist_hit(ctx.seat, opponent, night, card))
    ctx.finish(c.card)


EFFECTS: dict[str, Effect] = {
    "mastermind": mastermind,
    "thief": thief,
    "pickpocket": pickpocket,
    "inside_man": inside_man,
    "recruiter": recruiter,
    "informant": informant,
    "forger": forger,
    "fixer": fixer,
    "con_artist": con_artist,
    "wheelman": wheelman,
    "femme_fatale": femme_fatale,
    "smuggler": smuggler,
    "cat_burglar": cat_burglar,
    "thug": thug,
    "middle_man": middle_man,
    "fall_guy": fall_guy,
    "kidnapper": kidnapper,
    "enforcer": enforcer,
    "hitman": hitman,
}


# -- Job rewards (GR-J06 step 3, GR-J07, GR-J08) -----------------------------------------------------------
def reward_coffers(ctx: Ctx, amount: int, opponent: int | None) -> None:
    ctx.steal(None, amount)


def reward_one_opponent(ctx: Ctx, amount: int, opponent: int | None) -> None:
    assert opponent is not None
    ctx.emit(ev.opponent_chosen(ctx.seat, opponent))
    ctx.steal(opponent, amount)


def reward_each_opponent(ctx: Ctx, amount: int, opponent: int | None) -> None:
    for other in ctx.state.opponents(ctx.seat):
        ctx.steal(other, amount)


def reward_draw(ctx: Ctx, amount: int, opponent: int | None) -> None:
    for _ in range(amount):
        ctx.draw()


REWARDS: dict[str, Callable[[Ctx, int, int | None], None]] = {
    COFFERS: reward_coffers,
    ONE_OPPONENT: reward_one_opponent,
    EACH_OPPONENT: reward_each_opponent,
    DRAW: reward_draw,
}
NEEDS_OPPONENT = frozenset({ONE_OPPONENT})  # GR-J09: chosen when the reward reaches that part


def reward(ctx: Ctx, c: Caper, answer: Any) -> None:
    """Pay a Job's reward part by part (GR-J06 step 3), resuming after an opponent choice."""
    parts = JOBS_BY_ID[c.job].reward
    step = c.step
    while step < len(parts):
        part = parts[step]
        opponent = None
        if part.code in NEEDS_OPPONENT:
            if answer is START:
                answer = ctx.ask(OPPONENT, step)
                if answer is ASKED:
                    return
            opponent, answer = answer, START
        REWARDS[part.code](ctx, part.amount, opponent)
        step += 1
    ctx.complete()
    if not any(jobs for _, jobs in ctx.state.stacks):
        ctx.end(ALL_JOBS_DONE)  # GR-E01 (b) at step 4 of GR-J06, GR-X16


