"""Which engines the bots can play: the registry, tolerant of games still being written."""

from __future__ import annotations

import importlib

from famiglia.engine.registry import KNOWN_GAMES, Registry, default_registry


def playable_registry() -> Registry:
    """`default_registry()`, or — while an engine package exists without its ENGINE yet —
    every known game whose module imports and exports one."""
    try:
        return default_registry()
    except Exception:  # noqa: BLE001 - one half-written engine must not stop the others
        pass
    engines = {}
    for game_id, module_name in KNOWN_GAMES.items():
        try:
            module = importlib.import_module(module_name)
        except Exception:  # noqa: BLE001
            continue
        engine = getattr(module, "ENGINE", None)
        if engine is not None:
            engines[game_id] = engine
    return Registry(engines)
