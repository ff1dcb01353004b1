"""Winners and ranks (NC-V08..V16)."""

from __future__ import annotations

from famiglia.engine.protocol import Result, SeatOutcome

from .queries import bank_value, seat_respect, title_rank
from .state import Phase, State


def result(state: State) -> Result | None:
    if state.phase is not Phase.OVER:
        return None
    seats = range(state.seats)
    resp = {p: seat_respect(state, p) for p in seats}
    snitches = set(state.snitches)
    guilty = state.verdict_result == "guilty"
    eligible = [p for p in seats if (p in snitches) == guilty]  # NC-V08/V09

    def key(p: int) -> tuple[int, int, int]:
        return (resp[p], title_rank(state, p), bank_value(state.players[p]))  # NC-V15

    winners: list[int] = []
    if eligible:
        best = max(key(p) for p in eligible)
        winners = [p for p in eligible if key(p) == best]  # NC-V15 (3): shared win
    outcome = {
        "verdict": state.verdict_result,
        "verdict_position": str(state.verdict),
        "snitches": ",".join(str(p) for p in sorted(snitches)),
        "winners": ",".join(str(p) for p in winners) or "none",
    }
    if not winners:  # NC-V10: GUILTY without a Snitch, nobody wins; all share one rank
        # The last one: rank 1 is a win to every reader (Result.winners, standings, ratings,
        # the read models' `winner`), and nobody won. All equal, it rates as a draw all the same.
        outcome["no_winner"] = "true"
        outs = tuple(SeatOutcome(p, float(resp[p]), state.seats, _details(state, p)) for p in seats)
        return Result(outs, outcome)
    # NC-V16: winners, then the other eligible players, then the ineligible ones
    groups = [winners, [p for p in eligible if p not in winners], [p for p in seats if p not in eligible]]
    ranks: dict[int, int] = {}
    next_rank = 1
    for group in groups:
        ordered = sorted(group, key=key, reverse=True)
        for i, p in enumerate(ordered):
            if i and key(p) == key(ordered[i - 1]):
                ranks[p] = ranks[ordered[i - 1]]
            else:
                ranks[p] = next_rank + i if group is not winners else 1
        next_rank += len(group)
    outs = tuple(SeatOutcome(p, float(resp[p]), ranks[p], _details(state, p)) for p in seats)
    return Result(outs, outcome)


def _details(state: State, p: int) -> dict[str, str]:
    player = state.players[p]
    bonuses = [c for c in player.trophies if c.startswith("B")]
    return {"respect": str(seat_respect(state, p)), "snitch": str(p in state.snitches).lower(),
            "title": state.title_of(p), "bonuses": ",".join(bonuses), "bank": str(bank_value(player))}
