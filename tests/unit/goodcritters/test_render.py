"""Short text forms (STYLE: render.py) and the engine's properties as data (GC-K01, GC-D09, GC-D10)."""

from __future__ import annotations

from famiglia.engine import Rng
from famiglia.rules.goodcritters import ENGINE, INFO
from famiglia.rules.goodcritters.flow import OPTIONAL

from ._helpers import ROB, VOTE_YES, C, act, assign, table_state


def test_gc_r01_render_state_names_round_step_boss_pile_and_table() -> None:
    """GC-R01, GC-R05: the state prints as `round:1 step:DISTRIBUTE boss:0 pile:21 table:[...]`."""
    state = table_state()
    text = ENGINE.render_state(state)
    assert text.startswith("round:1 step:DISTRIBUTE boss:0 pile:21 table:[L060 L061")
    state, events = assign(state)
    assert ENGINE.render_event(events[0]).startswith("LootAssigned L060>0")
    assert ENGINE.render_command(C.choose_action_card(ROB, commit=True)) == "choose ROB +commit"
    assert ENGINE.render_command(C.place_threat(2)) == "threaten 2"


def test_gc_h06_rendered_redacted_events_show_no_secret() -> None:
    """GC-H06: the redacted form of a chosen card renders without the card."""
    state, _ = assign(table_state())
    (event,) = ENGINE.decide(state, 1, C.choose_action_card(VOTE_YES), Rng(0))
    assert ENGINE.render_event(ENGINE.redact(event, 2)) == "ActionCardChosen 1 - #1"
    state, _ = act(state, 1, C.choose_action_card(VOTE_YES))
    assert "cards:" in ENGINE.render_state(state)


def test_gc_d09_gc_d10_info_declares_optional_moves_and_a_true_step_bound() -> None:
    """GC-D09, GC-D10: threats, offers, gifts and card changes are optional; the bound holds."""
    assert INFO.optional_commands == OPTIONAL
    assert "choose_action_card" not in INFO.optional_commands and "commit" not in INFO.optional_commands
    assert INFO.simultaneous and INFO.min_players == 4 and INFO.max_players == 8
    # 8 players, the largest caps, every round taking one card from a 125-card pile
    assert INFO.max_steps >= 126 * (1 + 8 * (5 + 9 + 1) + 8 * (1 + 9 + 8 * 5))
