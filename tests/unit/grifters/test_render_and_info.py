"""Text forms (render.py) and the game's properties as data (INFO)."""

from __future__ import annotations

from famiglia.engine import MatchConfig
from famiglia.rules.grifters import ENGINE, INFO
from famiglia.testing.random_play import play_random


def test_every_event_and_command_has_a_short_text_form() -> None:
    play = play_random(ENGINE, 3, 9)
    texts = [ENGINE.render_event(e) for e in play.events] + [ENGINE.render_command(s.command) for s in play.steps]
    assert all(t and "\n" not in t for t in texts)
    assert ENGINE.render_state(play.state).startswith("round:")


def test_info_declares_the_contract_types_and_a_step_bound() -> None:
    assert INFO.game_id == "grifters" and INFO.command_type is not None and INFO.optional_commands == frozenset()
    assert INFO.max_steps >= 100 * 4  # GR-E08: at least one decision per turn of 100 rounds
    assert INFO.defaults()["max_rounds"] == "100"
    ENGINE.setup(MatchConfig(4, INFO.defaults()), 1)  # the defaults are valid options
