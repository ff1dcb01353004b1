"""A lease past its moves plays on only while the turn's LAST command is held (soak seed 26)."""

from __future__ import annotations

from tests.unit.bots.test_bots_and_held_answers import (
    test_matches_with_people_and_bots_play_to_the_end as walk,
)


def test_a_lease_past_its_moves_plays_on_only_while_its_last_command_is_held() -> None:
    """Fails on a change the suite once missed (`held` for `held_last` past a lease): a soak walk (seed 26, three seats, one
    person, a lease of 32, a call a seat) where a turn's held answer was written out by a later
    command of it; the task then played on a turn the dispatcher also queued, and the walk met
    duplicates/stale tasks."""
    walk(False, 32, 3, (0,), 26)
