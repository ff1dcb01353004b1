"""NP-V7 expansion gangster sets: find the set files and install them (the only I/O of the engine).

A set is a data file in the Table G format (`[[gangster]]` rows, like `data/gangsters.toml`) named
after the set: "Young Turks" is `young_turks.toml`, "Game Designers Set" `game_designers_set.toml`,
"Historical Gangsters Set" `historical_gangsters_set.toml`. No set is shipped (their contents are
unknown). The files of `data/expansions/` in this package are installed when the engine is
imported; another directory is given to the engine construction parameter
(`nothing_personal.engine(expansions_dir)`, which calls `install`). The first file of a name wins.
The rules stay pure: they read the installed cards from `data.SETS`, `data.G` and `data.GIDX`.
A file that fails the checks is not installed; a match asking for it is refused with the reason.
Rules modules read no environment and take no locks: install sets at start-up, before matches run.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from famiglia.engine import RuleViolation

from .data import DATA_DIR, REFUSED, SETS, add_set, load_set, set_name

PACKAGE_DIR = DATA_DIR / "expansions"


def install(*dirs: str | Path) -> list[str]:
    """Install every set file of `dirs` whose name is not installed yet; returns the names installed.

    Installing is idempotent and never changes an installed set, so indices already in a match's
    state stay valid."""
    done: list[str] = []
    for d in dirs:
        path = Path(d)
        if not path.is_dir():
            continue
        for f in sorted(path.glob("*.toml")):
            name = set_name(f.stem)
            if name in SETS:
                continue
            try:
                with open(f, "rb") as fh:
                    rows = list(tomllib.load(fh).get("gangster", ()))
                add_set(name, load_set(name, rows))
                done.append(name)
            except (RuleViolation, tomllib.TOMLDecodeError, KeyError, TypeError, ValueError, OSError) as exc:
                REFUSED[name] = f"{f.name}: {exc}"
    return done
