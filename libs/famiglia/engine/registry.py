"""Which games this server plays: game id -> engine. No service needs a change to add one."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator

from .protocol import Engine

# game id -> module that exports ENGINE (reading order = listing order)
KNOWN_GAMES: dict[str, str] = {
    "goodcritters": "famiglia.rules.goodcritters",
    "nothing_personal": "famiglia.rules.nothing_personal",
    "nostra_city": "famiglia.rules.nostra_city",
    "grifters": "famiglia.rules.grifters",
}

# game id -> environment variable naming a directory of extra card data the game's module
# installs through its `engine(directory)` (NP-V7: expansion gangster sets, one Table G file each)
DATA_DIRS: dict[str, str] = {
    "nothing_personal": "FAMIGLIA_NP_EXPANSIONS",
}


class UnknownGame(KeyError):
    pass


class Registry:
    def __init__(self, engines: dict[str, Engine]) -> None:
        self._engines = dict(engines)

    def get(self, game_id: str) -> Engine:
        try:
            return self._engines[game_id]
        except KeyError:
            raise UnknownGame(game_id) from None

    def __contains__(self, game_id: object) -> bool:
        return game_id in self._engines

    def __iter__(self) -> Iterator[str]:
        return iter(self._engines)

    def engines(self) -> list[Engine]:
        return list(self._engines.values())


def default_registry(games: str | None = None) -> Registry:
    """Every known game whose engine module is present, or only those named in
    `games` / FAMIGLIA_GAMES (comma-separated game ids) when set. A game with extra card
    data installs it here, at start-up in every process, from the directory in its DATA_DIRS
    variable."""
    wanted = games if games is not None else os.environ.get("FAMIGLIA_GAMES", "")
    only = {g.strip() for g in wanted.split(",") if g.strip()}
    unknown = only - set(KNOWN_GAMES)
    if unknown and games is None:  # a setting: the service stops with a line naming it
        raise SystemExit(f"FAMIGLIA_GAMES={wanted!r} names no game famiglia has: {', '.join(sorted(unknown))} "
                         f"(the games: {', '.join(KNOWN_GAMES)})")
    if unknown:
        raise UnknownGame(", ".join(sorted(unknown)))
    engines: dict[str, Engine] = {}
    for game_id, module_name in KNOWN_GAMES.items():
        if only and game_id not in only:
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue
            raise
        variable = DATA_DIRS.get(game_id)
        data_dir = os.environ.get(variable, "").strip() if variable else ""
        if data_dir and not os.path.isdir(data_dir):  # a typo would serve the game without its sets
            raise SystemExit(f"{variable}={data_dir!r} is not a directory")
        engines[game_id] = module.engine(data_dir) if data_dir else module.ENGINE
    return Registry(engines)
