"""Why a seat lost (`losses`): Nostra City's losses sorted by the verdict and the Snitches
(NC-V08..V10, V15) from the engine's own Result; other games by score."""

from __future__ import annotations

import pytest

from famiglia.bots.losses import BEHIND, NOBODY_WON, TIE_LOST, loss_cause
from famiglia.bots.toy import ENGINE as HIGHCARD
from famiglia.engine import Result, SeatOutcome
from famiglia.rules.nostra_city import ENGINE
from famiglia.rules.nostra_city.state import Phase
from tests.unit.nostra_city.helpers import notes, seat, start, table


def _over(verdict: str, snitches: tuple[int, ...], respect: tuple[int, ...],
          bank: tuple[int, ...] = (0, 0, 0)) -> Result:
    """The engine's Result of a finished 3-seat match: each seat's Respect from R1 cards alone,
    no titles, and `bank[i]` unmarked $5,000 Notes (the last tie-break, NC-V15)."""
    state = table(start(3), phase=Phase.OVER, verdict_result=verdict, snitches=snitches, titles=())
    for i, r in enumerate(respect):
        state = seat(state, i, trophies=("R1",) * r, turfs=(), bank=tuple(notes(5000, "", bank[i])))
    result = ENGINE.result(state)
    assert result is not None
    return result


def test_a_winner_has_no_loss_cause() -> None:
    result = _over("innocent", (), (5, 3, 1))
    assert loss_cause("nostra_city", result, 0) is None


def test_nc_v08_a_loyal_seat_under_innocent_loses_behind_in_respect() -> None:
    result = _over("innocent", (), (5, 3, 1))
    assert loss_cause("nostra_city", result, 1) == "loyal, INNOCENT: behind another loyal seat in Respect"


def test_nc_v08_a_loyal_seat_under_guilty_loses_to_another_seats_snitch() -> None:
    result = _over("guilty", (2,), (5, 3, 1))
    assert result.winners() == [2]
    assert loss_cause("nostra_city", result, 0) == "loyal, GUILTY: another seat's Snitch won"


def test_nc_v10_a_loyal_seat_under_guilty_without_a_snitch_loses_with_nobody_winning() -> None:
    result = _over("guilty", (), (5, 3, 1))
    assert result.no_winner
    assert {loss_cause("nostra_city", result, s) for s in range(3)} == {"loyal, GUILTY: nobody won"}


def test_nc_v09_a_snitch_under_innocent_cannot_win() -> None:
    result = _over("innocent", (0,), (9, 3, 1))
    assert loss_cause("nostra_city", result, 0) == "Snitch, INNOCENT"


def test_nc_v09_a_snitch_under_guilty_loses_behind_another_snitch() -> None:
    result = _over("guilty", (0, 1), (3, 5, 9))
    assert loss_cause("nostra_city", result, 0) == "Snitch, GUILTY: behind another Snitch in Respect"


def test_nc_v15_level_in_respect_a_seat_can_lose_on_the_bank() -> None:
    result = _over("innocent", (), (5, 5, 1), bank=(0, 1, 0))
    assert result.winners() == [1]
    assert loss_cause("nostra_city", result, 0) == "loyal, INNOCENT: Respect tied, tie-break lost"


def test_other_games_lose_behind_in_score_or_on_a_tie_break() -> None:
    result = Result((SeatOutcome(0, 7.0, 1), SeatOutcome(1, 7.0, 2), SeatOutcome(2, 3.0, 3)))
    assert [loss_cause("grifters", result, s) for s in range(3)] == [None, TIE_LOST, BEHIND]
    nobody = Result((SeatOutcome(0, 1.0, 2), SeatOutcome(1, 1.0, 2)), {"no_winner": "true"})
    assert loss_cause("highcard", nobody, 0) == NOBODY_WON


@pytest.mark.parametrize("game_id", ["nostra_city", HIGHCARD.info.game_id])
def test_every_loss_of_a_random_match_has_a_cause_and_no_win_has_one(game_id: str) -> None:
    from famiglia.bots import make_policy
    from famiglia.bots.arena import play_match

    engine = ENGINE if game_id == "nostra_city" else HIGHCARD
    causes = set()
    for seed in range(20):
        result = play_match(engine, [make_policy("random") for _ in range(3)], seed).result
        for s in result.seats:
            cause = loss_cause(game_id, result, s.seat)
            assert (cause is None) == (s.rank == 1), (seed, s)
            causes.add(cause)
    if game_id == "nostra_city":  # the seeds give several kinds of loss, so a wrong one would show
        assert len(causes - {None}) >= 3, causes
