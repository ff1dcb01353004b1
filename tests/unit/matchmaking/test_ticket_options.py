"""A ticket's options are the game's to judge: a ticket CreateMatch would refuse is never queued
(else the matcher retried it for ever while its players waited), and a ticket keeps only the
table sizes at which the game accepts its options."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from famiglia.engine.registry import default_registry
from famiglia.matchmaking import GameShape, InvalidRequest, normalize_request
from services.matchmaking.bootstrap import check_bot_policy, games_of

GAMES = games_of(default_registry())


def only_at(size: int):  # type: ignore[no-untyped-def]
    def check(seats: int, options: Mapping[str, str]) -> tuple[str, str] | None:
        return None if seats == size else ("XX-F01", f"not for {seats}")
    return check


def test_a_ticket_keeps_the_sizes_at_which_the_game_accepts_its_options() -> None:
    shape = GameShape("parlour", 2, 5, check_options=only_at(4))
    assert normalize_request(shape, [], {}, 1).seat_counts == {4}
    assert normalize_request(shape, [3, 4], {}, 1).seat_counts == {4}


def test_a_ticket_no_size_fits_is_refused_with_the_games_code() -> None:
    shape = GameShape("parlour", 2, 5, check_options=only_at(4))
    with pytest.raises(InvalidRequest) as exc:
        normalize_request(shape, [2, 3], {}, 1)
    assert exc.value.code == "XX-F01" and "not for 2" in exc.value.message


@pytest.mark.parametrize(("game", "options", "code"), [
    ("grifters", {"isk_tokens": "99999999999999999999"}, "GR-F01"),  # the audit's stuck ticket
    ("grifters", {"timeouts": "nan,30"}, "GR-F01"),
    ("goodcritters", {"timeouts.step3_s": "\u00b2"}, "GC-K01"),
    ("nostra_city", {"turn_timeout_s": "86401"}, "NC-K90"),
    ("nothing_personal", {"commission_turns": "61"}, "NP-C33"),
])
def test_options_the_game_refuses_are_refused_with_its_rule_id(game: str, options: dict[str, str],
                                                                code: str) -> None:
    with pytest.raises(InvalidRequest) as exc:
        normalize_request(GAMES[game], [], options, 1)
    assert exc.value.code == code


def test_a_seat_option_narrows_the_table_sizes_of_the_real_game() -> None:
    """NC-S16: a first-player seat of 4 exists only at a table of 5."""
    assert normalize_request(GAMES["nostra_city"], [], {"first_player_seat": "4"}, 1).seat_counts == {5}
    with pytest.raises(InvalidRequest) as exc:
        normalize_request(GAMES["nostra_city"], [3], {"first_player_seat": "4"}, 1)
    assert exc.value.code == "NC-S16"


def test_default_options_fit_every_size_of_every_game() -> None:
    for shape in GAMES.values():
        assert normalize_request(shape, [], {}, 1).seat_counts == shape.seat_counts


@pytest.mark.parametrize("spec", ["ismcts?iterations=1e20", "ismcts?seconds=nan", "heuristic?samples=0",
                                  "random?x=1"])
def test_a_backfill_policy_with_bad_parameters_is_refused_at_start_up(spec: str) -> None:
    with pytest.raises(ValueError, match="FAMIGLIA_MM_BOT_POLICY"):
        check_bot_policy(spec)
