"""Match options of Nothing Personal, named after the rules file; validated once (NP-X21).

Options arrive as strings. Every variant is off by default (NP-V1..NP-V9). Numbers are ASCII
digits within each key's bounds; a bad value is refused with the rule id of its key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from famiglia.engine import OptionSpec, RuleViolation

from .data import COLOURS, REFUSED, SETS, TIMEOUTS, set_name

OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("commission_turns", "30", "Non-pass Commission turns per seat per phase", (), "NP-C33"),
    OptionSpec("offers_per_phase", "3", "Trade, hand-over and contract offers per seat per phase", (), "NP-M9"),
    OptionSpec("chats_per_phase", "10", "Chat messages per seat per phase", (), "NP-M10"),
    OptionSpec("autopass_changes_per_phase", "2", "Changes of the standing auto-pass per seat per phase",
               (), "NP-M10"),
    OptionSpec("arrest_associates", "false", "The Feds also check Associates", ("false", "true"), "NP-P4"),
    OptionSpec("random_setup", "false", "Random setup without the type rule", ("false", "true"), "NP-V6"),
    OptionSpec("reroll_tokens", "false", "Second-edition re-roll tokens, one per seat", ("false", "true"),
               "NP-V9"),
    OptionSpec("keep_your_word", "false", "Binding contracts", ("false", "true"), "NP-V1"),
    OptionSpec("expansions", "", "Comma-separated expansion gangster sets, each an installed data file "
               "(none shipped)", (), "NP-V7"),
    OptionSpec("colours", "", "Comma-separated family colours in seat order", (), "NP-S2"),
    *(OptionSpec(f"timeouts.{clock}_s", f"{TIMEOUTS[clock]:g}", f"{what} clock, whole seconds", (), rule)
      for clock, what, rule in (
          ("setup", "Setup marker", "NP-D3"), ("commission", "Commission turn", "NP-D4"),
          ("card_window", "Card window", "NP-D5"), ("reroll_window", "Reroll window", "NP-D6"),
          ("ruling", "Tie ruling", "NP-D9"), ("action", "Crew action turn", "NP-D10"),
          ("blackmail", "Blackmail permission", "NP-D11"), ("invite", "Invited placement", "NP-D12"),
          ("buy", "Fence purchase", "NP-D13"), ("vacancy", "Vacancy choice", "NP-D14"))),
)
CLOCKS = tuple(o.key[len("timeouts."):-len("_s")] for o in OPTIONS if o.key.startswith("timeouts."))
"""NP-D1: the decisions whose clock a match may set (`TIMEOUTS` keys; not the auto-pass's, NP-D7)."""
MAX_TIMEOUT_S = 86_400


MAX_COLOUR_CHARS = 24
"""NP-S2: a family colour is a short printable name."""
_WHOLE = re.compile(r"[0-9]{1,12}")
_SHOWN = 40


def _show(value: str) -> str:
    """A value as a message quotes it: long values cut short."""
    return repr(value if len(value) <= _SHOWN else value[:_SHOWN] + "...")


@dataclass(frozen=True, slots=True)
class Config:
    commission_turns: int = 30
    offers_per_phase: int = 3
    chats_per_phase: int = 10
    autopass_changes_per_phase: int = 2
    arrest_associates: bool = False
    random_setup: bool = False
    reroll_tokens: bool = False
    keep_your_word: bool = False
    expansions: tuple[str, ...] = ()   # NP-V7: installed set names, in the option's order
    colours: tuple[str, ...] = COLOURS
    timeouts: tuple[tuple[str, float], ...] = ()
    """NP-D1: the clocks the match sets apart from `TIMEOUTS`, as (its key, seconds); (): none."""


def _int(options: Mapping[str, str], key: str, default: int, low: int, high: int) -> int:
    raw = str(options.get(key, str(default))).strip()
    if not _WHOLE.fullmatch(raw):
        raise RuleViolation(_rule(key), f"{key} must be a whole number from {low} to {high}, not {_show(raw)}")
    value = int(raw)
    if not low <= value <= high:
        raise RuleViolation(_rule(key), f"{key} must be between {low} and {high}")
    return value


def _bool(options: Mapping[str, str], key: str) -> bool:
    raw = str(options.get(key, "false")).lower()
    if raw not in ("true", "false"):
        raise RuleViolation(_rule(key), f"{key} must be true or false, not {_show(raw)}")
    return raw == "true"


def _rule(key: str) -> str:
    return next(o.rule for o in OPTIONS if o.key == key)


def parse_options(options: Mapping[str, str], seats: int) -> Config:
    """Validate the string options. The caps have upper limits so that `INFO.max_steps` stays a
    true bound on a match's commands under random legal play (DESIGN: every match ends)."""
    known = {o.key for o in OPTIONS}
    unknown = sorted(set(options) - known)
    if unknown:
        raise RuleViolation("NP-X21", f"unknown option(s) {', '.join(_show(k) for k in unknown)}")
    expansions = parse_expansions(options.get("expansions", ""))
    colours: tuple[str, ...] = COLOURS
    raw = options.get("colours", "")
    if raw:
        colours = tuple(c.strip() for c in raw.split(","))
        if len(colours) < seats or len(set(colours)) != len(colours) or not all(colours):
            raise RuleViolation("NP-S2", "colours must name one distinct colour per seat")
        if len(colours) > len(COLOURS) or any(len(c) > MAX_COLOUR_CHARS or not c.isprintable() for c in colours):
            raise RuleViolation("NP-S2", f"colours names at most {len(COLOURS)} colours, each at most "
                                         f"{MAX_COLOUR_CHARS} printable characters")
    timeouts = {clock: float(_int(options, f"timeouts.{clock}_s", int(TIMEOUTS[clock]), 1, MAX_TIMEOUT_S))
                for clock in CLOCKS if f"timeouts.{clock}_s" in options}
    return Config(
        timeouts=tuple((k, v) for k, v in timeouts.items() if v != TIMEOUTS[k]),
        commission_turns=_int(options, "commission_turns", 30, 0, 60),
        offers_per_phase=_int(options, "offers_per_phase", 3, 0, 10),
        chats_per_phase=_int(options, "chats_per_phase", 10, 0, 50),
        autopass_changes_per_phase=_int(options, "autopass_changes_per_phase", 2, 0, 10),
        arrest_associates=_bool(options, "arrest_associates"),
        random_setup=_bool(options, "random_setup"),
        reroll_tokens=_bool(options, "reroll_tokens"),
        keep_your_word=_bool(options, "keep_your_word"),
        expansions=expansions,
        colours=colours[:seats],
    )


def parse_expansions(raw: str) -> tuple[str, ...]:
    """NP-V7: the named sets must be installed (see `expansions`); none is shipped."""
    names = tuple(set_name(n) for n in str(raw).split(",") if n.strip())
    if len(set(names)) != len(names):
        raise RuleViolation("NP-V7", f"an expansion set is named twice in {_show(str(raw))}")
    for name in names:
        if name not in SETS:
            why = REFUSED.get(name)
            file = f"{name}.toml" if len(name) <= _SHOWN else "such file"
            raise RuleViolation("NP-V7", f"expansion set {_show(name)} is not installed: "
                                + (f"its file was refused ({why})" if why else
                                   f"no {file} in the expansion data directories (no set is shipped)"))
    return names
