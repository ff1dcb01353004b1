"""What the ISMCTS search values and how it is steered (the one-ply prior, per-game tuning)."""

from __future__ import annotations

import pytest

from famiglia.bots import Decision, make_policy
from famiglia.bots.evaluate import margin_values, nostra_city_chance, seat_values, win_values
from famiglia.bots.ismcts import TUNING, Ismcts
from famiglia.bots.toy import ENGINE as HIGHCARD
from famiglia.bots.toy import State
from famiglia.engine import Result, SeatOutcome


def test_a_clear_lead_is_worth_more_than_a_level_game_and_a_gap_less() -> None:
    leader, level, trailer = margin_values([30.0, 18.0, 18.0], scale=12.0)
    assert leader > 0.85
    assert level == pytest.approx(0.5 * (1 + __import__("math").tanh(-1.0)))
    assert trailer == level
    assert margin_values([5.0, 5.0], scale=1.0) == [0.5, 0.5]


def test_a_finished_game_values_the_win_far_above_second_place() -> None:
    result = Result((SeatOutcome(0, 9, 2), SeatOutcome(1, 12, 1), SeatOutcome(2, 3, 3)))
    values = win_values(result, 3)
    assert values[1] == 1.0
    assert 0.0 < values[0] <= 0.25
    assert values[2] == 0.0


def test_seat_values_of_a_finished_high_card_game_are_the_win_values() -> None:
    state = State(seats=2, hand_size=1, clock_s=0, hands=((), ()), scores=(3, 9), tricks_done=1)
    assert seat_values(HIGHCARD, state, 2) == [0.0, 1.0]


def test_with_one_iteration_the_prior_alone_takes_the_trick_it_can_win() -> None:
    """Seat 1 follows a 6 holding 2, 7 and 13: one iteration only expands the move the
    one-ply prior ranks first, so ISMCTS must not give the trick away with the 2."""
    state = State(seats=2, hand_size=3, clock_s=0, hands=((1, 3), (2, 7, 13)), scores=(0, 0), trick=(6,),
                  leader=0, seen=(6,), tricks_done=0)
    legal = tuple(HIGHCARD.legal_commands(state, 1))
    decision = Decision("highcard", 1, HIGHCARD.view(state, 1), legal, 5, seed=1)
    for seed in range(5):
        chosen = make_policy("ismcts?iterations=1&seconds=10").choose(
            HIGHCARD, Decision(decision.game_id, 1, decision.view, legal, 5, seed=seed))
        assert chosen.play.card in (7, 13)  # type: ignore[attr-defined]


def test_a_spec_overrides_the_games_tuning_and_leaves_the_rest() -> None:
    policy = make_policy("ismcts?iterations=10&rollout=3&prior=0&exploration=0.9")
    assert isinstance(policy, Ismcts)
    tuned = policy.tuning("nostra_city")
    assert (tuned.rollout_steps, tuned.prior, tuned.exploration) == (3, 0.0, 0.9)
    default = make_policy("ismcts").tuning("goodcritters")  # type: ignore[attr-defined]
    assert default == TUNING.get("goodcritters", default)


def _nostra_city_view(*, verdict: int, my_hand: tuple[str, ...], drawn: int = 5, month: int = 6,
                      phase: str = "trial"):
    from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

    players = [pb.SeatView(seat=0, respect=5, hand=list(my_hand), hand_size=len(my_hand)),
               pb.SeatView(seat=1, respect=5, vendetta_drawn=drawn),
               pb.SeatView(seat=2, respect=5, vendetta_drawn=drawn)]
    return pb.View(viewer=0, seats=3, month=month, phase=phase, verdict=verdict, players=players)


def test_nostra_city_chance_follows_the_verdict_a_seat_needs() -> None:
    """NC-V08/V09: a loyal seat wants INNOCENT, a Snitch wants GUILTY."""
    from famiglia.rules.nostra_city.data import VENDETTA

    snitch_card = next(v.id for v in VENDETTA if v.kind == "snitch")
    loyal_innocent = nostra_city_chance(_nostra_city_view(verdict=4, my_hand=()), 0)
    loyal_guilty = nostra_city_chance(_nostra_city_view(verdict=-4, my_hand=()), 0)
    snitch_innocent = nostra_city_chance(_nostra_city_view(verdict=4, my_hand=(snitch_card,)), 0)
    snitch_guilty = nostra_city_chance(_nostra_city_view(verdict=-4, my_hand=(snitch_card,)), 0)
    assert snitch_guilty > loyal_guilty and snitch_guilty > 0.5 > snitch_innocent
    assert loyal_innocent > snitch_innocent and loyal_innocent > loyal_guilty
    # GUILTY while nobody else drew a Vendetta card: no Snitch, so nobody wins (NC-V10), a loyal
    # seat included: no hope there, whoever leads in Respect
    assert nostra_city_chance(_nostra_city_view(verdict=-4, my_hand=(), drawn=0), 0) < 0.1


def _bribing_view(*, bank: list[int], corrupted: list[int] = (), free: int = 2, month: int = 3,
                  phase: str = "trial", order: tuple[int, ...] = (1, 0, 2), turn: int = 1, snitch: bool = False):
    from famiglia.nostra_city.v1 import nostra_city_pb2 as pb
    from famiglia.rules.nostra_city.data import VENDETTA

    hand = [next(v.id for v in VENDETTA if v.kind == "snitch")] if snitch else []
    me = pb.SeatView(seat=0, respect=5, bank=bank, bank_size=len(bank), wiseguys=["W01", "W02", "W03"],
                     busy=["W01", "W02", "W03"][free:], corrupted=list(corrupted), hand=hand, hand_size=len(hand))
    others = [pb.SeatView(seat=s, respect=5, bank_size=len(bank) + len(corrupted), vendetta_drawn=2) for s in (1, 2)]
    return pb.View(viewer=0, seats=3, month=month, phase=phase, verdict=0, order=order, turn=turn,
                   players=[me, *others])


def test_nostra_city_chance_counts_the_notes_a_seat_can_still_bribe_with() -> None:
    """NC-T01, NC-V05: an Innocent Note in a loyal seat's Bank is a bribe it can still make, worth
    less than one made (so a bribe is never put off) and nothing once its last Trial turn is
    over; a Guilty one is that to a Snitch. Kept in the Bank, out of a bid or a gift, it raises
    the chance; what holds it back is the Free Wiseguys left for the Trial."""
    from famiglia.rules.nostra_city.data import NOTES

    innocent = [n.id for n in NOTES if n.mark == "I"][:2]
    guilty = [n.id for n in NOTES if n.mark == "G"][:2]
    plain = [n.id for n in NOTES if not n.mark][:2]

    def chance(**kw) -> float:  # noqa: ANN003
        return nostra_city_chance(_bribing_view(**kw), 0)

    kept, spent = chance(bank=innocent[:1] + plain[:1]), chance(bank=plain[:2])
    bribed = chance(bank=plain[:1], corrupted=innocent[:1])
    assert bribed > kept > spent
    assert chance(bank=innocent[:1] + plain[:1], free=0) < kept  # no Wiseguy left this month
    last = chance(bank=plain[:2], month=6)
    assert chance(bank=innocent[:1] + plain[:1], free=0, month=6) == pytest.approx(last)  # no Trial after
    assert chance(bank=innocent[:1] + plain[:1], month=6) > last
    over = {"month": 6, "turn": 2}  # seat 0's last Trial turn is behind it
    assert chance(bank=innocent[:1] + plain[:1], **over) == pytest.approx(chance(bank=plain[:2], **over))
    assert chance(bank=guilty[:1] + plain[:1], snitch=True) > chance(bank=plain[:2], snitch=True)
    assert chance(bank=guilty[:1] + plain[:1]) == pytest.approx(spent)  # a loyal seat's Guilty Note


def test_past_its_deadline_the_search_answers_with_what_it_has() -> None:
    """The decision's deadline (the worker's time limit) ends the search, whatever its
    own budget: one iteration, then the best root move so far."""
    import time

    state = State(seats=2, hand_size=3, clock_s=0, hands=((1, 3), (2, 7, 13)), scores=(0, 0), trick=(6,),
                  leader=0, seen=(6,), tricks_done=0)
    legal = tuple(HIGHCARD.legal_commands(state, 1))
    policy = Ismcts(iterations=10**6, seconds=100.0)
    late = Decision("highcard", 1, HIGHCARD.view(state, 1), legal, 5, seed=1, deadline=time.monotonic())
    assert policy.choose(HIGHCARD, late) in legal
    assert policy.last_iterations == 1
    # 0.25 s, not 0.05: a thread descheduled past a 50 ms deadline on a loaded machine made one iteration only
    policy.choose(HIGHCARD, Decision("highcard", 1, late.view, legal, 5, seed=1, deadline=time.monotonic() + 0.25))
    assert 1 < policy.last_iterations < 10**6
