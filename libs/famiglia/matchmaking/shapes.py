"""The GameShape of each registered game: what matchmaking needs of it (sizes, options and the
game's own options check), for the service and for clients that check a ticket first."""

from __future__ import annotations

import functools

from famiglia.engine import Engine, options_refusal
from famiglia.engine.registry import Registry

from .model import GameShape, OptionCheck


def games_of(registry: Registry) -> dict[str, GameShape]:
    """What matchmaking needs of each registered game (sizes, options, the options check)."""
    return {
        e.info.game_id: GameShape(
            e.info.game_id, e.info.min_players, e.info.max_players,
            {o.key: o.default for o in e.info.options}, {o.key: tuple(o.choices) for o in e.info.options},
            option_check(e))
        for e in registry.engines()
    }


def option_check(engine: Engine) -> OptionCheck:
    """The game's own verdict on a ticket's options (`famiglia.engine.options_refusal`): what
    CreateMatch will run for the table."""
    return functools.partial(options_refusal, engine)
