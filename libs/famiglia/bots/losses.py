"""Why a seat lost a finished match, per game: the strength bench's `--losses` sorts a
candidate's losses by it, so a change to a bot shows which kind of loss it cut and which it
added. Every session tuning Nostra City's search wrote its own script for this; the verdict,
not the score, decides most of its matches.

Read from the `Result` alone (its outcome and the seats' details), as any reader of a finished
match sees it. A game without a function of its own gets `generic`: a score race.
"""

from __future__ import annotations

from collections.abc import Callable

from famiglia.engine import Result

LossCause = Callable[[Result, int], str]

NOBODY_WON = "nobody won"
BEHIND = "behind in score"
TIE_LOST = "score tied, tie-break lost"


def _best_winner(result: Result) -> float | None:
    scores = [o.score for o in result.seats if o.rank == 1]
    return max(scores) if scores and not result.no_winner else None


def generic(result: Result, seat: int) -> str:
    """Beaten on score, or level with a winner and ranked below it by the game's tie-breaks."""
    best = _best_winner(result)
    if best is None:
        return NOBODY_WON
    mine = next(o.score for o in result.seats if o.seat == seat)
    return TIE_LOST if mine >= best else BEHIND


def nostra_city(result: Result, seat: int) -> str:
    """A loyal seat can win only under INNOCENT, a Snitch only under GUILTY (NC-V08, V09);
    GUILTY without a Snitch is won by nobody (NC-V10); among the eligible the most Respect wins,
    then the title and the Bank (NC-V15). The score of a seat is its Respect."""
    me = next(o for o in result.seats if o.seat == seat)
    snitch = me.details.get("snitch") == "true"
    guilty = result.outcome.get("verdict") == "guilty"
    who = "Snitch" if snitch else "loyal"
    if snitch != guilty:
        if not snitch:
            return "loyal, GUILTY: " + ("nobody won" if result.no_winner else "another seat's Snitch won")
        return "Snitch, INNOCENT"
    best = _best_winner(result)
    if best is not None and me.score >= best:
        return f"{who}, {'GUILTY' if guilty else 'INNOCENT'}: Respect tied, tie-break lost"
    rival = "another Snitch" if snitch else "another loyal seat"
    return f"{who}, {'GUILTY' if guilty else 'INNOCENT'}: behind {rival} in Respect"


LOSS_CAUSES: dict[str, LossCause] = {"nostra_city": nostra_city}


def loss_cause(game_id: str, result: Result, seat: int) -> str | None:
    """None if `seat` won (ranked 1, as the bench counts a win), else why it lost."""
    if any(o.seat == seat and o.rank == 1 for o in result.seats):
        return None
    return LOSS_CAUSES.get(game_id, generic)(result, seat)
