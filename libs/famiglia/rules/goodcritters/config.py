"""Match options (GC-K01): keys, defaults, allowed values and parsing.

A bad option is refused with RuleViolation("GC-K01", ...), naming the key's own rule id.

Options arrive as strings. Every key of GC-K01 is listed; keys whose behaviour the engine
implements in one way only (the deck's values and types, the Fuzz table...) accept just that
value, so a configuration that asks for something else is refused instead of ignored.
Nested keys of GC-K01 are flattened with dots (`payoff.enabled`, `timeouts.step3_s`).
Numbers are ASCII digits within the bounds below, so no option can overflow a field of the events.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from famiglia.engine import OptionSpec, RuleViolation

from .data import ACTION_KEYS, LOOT_COPIES, MAX_PLAYERS

_BOOL = ("false", "true")
_OFFER_VIS = ("open", "peek", "hidden")
MAX_TIMEOUT_S = 86_400
"""A clock of GC-D02..GC-D06: at most a day."""
MAX_PAYOFF_CARD_VALUE = 1_000_000
"""GC-P03: the score of one Payoff card (Loot cards are worth 2,000 to 5,000)."""
_DIGITS = re.compile(r"[0-9]{1,12}")
_SHOWN = 40


def _ints(lo: int, hi: int) -> tuple[str, ...]:
    return tuple(str(i) for i in range(lo, hi + 1))


OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("players", "4-8", "players per match", ("4-8",), "GC-S01"),
    OptionSpec("loot_values", "2000,3000,4000,5000", "Loot card values", ("2000,3000,4000,5000",), "GC-S05"),
    OptionSpec(
        "loot_types",
        "cash,gems,jewelry,painting,sculpture",
        "Loot card types (no effect in the rules)",
        ("cash,gems,jewelry,painting,sculpture",),
        "GC-S06",
    ),
    OptionSpec(
        "loot_copies_per_value_and_type",
        str(LOOT_COPIES),
        "copies of each value and type in the Loot deck (fewer make small test decks)",
        _ints(1, LOOT_COPIES),
        "GC-S07",
    ),
    OptionSpec("start_stash", "one_of_each_value", "starting Stash", ("one_of_each_value",), "GC-S08"),
    OptionSpec(
        "fuzz_table",
        "4:6/4,5:7/5,6:5/4,7:7/6,8:5/5",
        "players:parts/Fuzz part from the top",
        ("4:6/4,5:7/5,6:5/4,7:7/6,8:5/5",),
        "GC-S10",
    ),
    OptionSpec(
        "fuzz_insert", "uniform_gap_in_part", "where The Fuzz! goes", ("uniform_gap_in_part",), "GC-S11"
    ),
    OptionSpec(
        "first_boss_seat",
        "",
        "seat of the first Boss; empty = random with the match rng",
        ("", *_ints(0, 7)),
        "GC-S13",
    ),
    OptionSpec("reveal_per_round", "players_plus_2", "cards shown in Step 1", ("players_plus_2",), "GC-R04"),
    OptionSpec("reveal_after_failed_vote", "2", "cards shown after a failed vote", _ints(1, 4), "GC-V06"),
    OptionSpec(
        "actions",
        "vote_yes,vote_no,skim,rob,guard",
        "the Action cards",
        ("vote_yes,vote_no,skim,rob,guard",),
        "GC-A08",
    ),
    OptionSpec("skims_per_round", "1", "how many Skims per round take a card", _ints(1, 3), "GC-A12"),
    OptionSpec("guard_counter_steal", "automatic", "the Guard's counter-steal", ("automatic",), "GC-A18"),
    OptionSpec(
        "rob_pick", "uniform_from_current_stash", "how Rob picks", ("uniform_from_current_stash",), "GC-A19"
    ),
    OptionSpec("stash_counts_public", "true", "whether Stash sizes are public", _BOOL, "GC-H03"),
    OptionSpec(
        "skim_fuzz_failed_vote_extra_cards",
        "false",
        "after a Skim drew The Fuzz!, a failed vote still names a Boss and shows cards",
        _BOOL,
        "GC-E04",
    ),
    OptionSpec("step3_mode", "open", "Step 3 all at once, or in turns", ("open", "turns"), "GC-D06"),
    OptionSpec(
        "step3_public_change_limit", "3", "public changes per player and round", _ints(0, 5), "GC-D09"
    ),
    OptionSpec("step3_card_choice_limit", "5", "card choices per player and round", _ints(1, 9), "GC-D10"),
    OptionSpec("timeouts.distribution_s", "90", "Step 2 clock, seconds", (), "GC-D02"),
    OptionSpec("timeouts.step3_s", "120", "Step 3 deadline (open mode), seconds", (), "GC-D05"),
    OptionSpec("timeouts.turn_s", "30", "Step 3a turn clock, seconds", (), "GC-D06"),
    OptionSpec("timeouts.choose_s", "60", "Step 3b deadline, seconds", (), "GC-D06"),
    OptionSpec(
        "timeout_defaults.distribution",
        "round_robin_from_boss_left",
        "Step 2 default",
        ("round_robin_from_boss_left",),
        "GC-D02",
    ),
    OptionSpec(
        "timeout_defaults.action",
        "vote_yes",
        "card played when none was chosen",
        tuple(ACTION_KEYS.values()),
        "GC-D05",
    ),
    OptionSpec("winner_tiebreak", "", "empty = shared win", ("", "more_loot_cards"), "GC-T03"),
    OptionSpec("payoff.enabled", "false", "the Payoff variant", _BOOL, "GC-P01"),
    OptionSpec("payoff.tokens_per_player", "2", "Payoff tokens per player", _ints(0, 4), "GC-P02"),
    OptionSpec("payoff.cards_per_player", "5", "Payoff cards per player", _ints(0, 10), "GC-P02"),
    OptionSpec("payoff.card_value", "1000", "score of one Payoff card", (), "GC-P03"),
    OptionSpec(
        "payoff.offers_per_briber_and_target", "1", "offers one briber may have per target", ("1",), "GC-P08"
    ),
    OptionSpec("payoff.resolve_at", "target_reveal", "when offers resolve", ("target_reveal",), "GC-P11"),
    OptionSpec(
        "payoff.gift_steps", "2,3", "steps in which gifts may be given", ("2,3", "2", "3", ""), "GC-P06"
    ),
    OptionSpec(
        "payoff.offer_loot_visibility", "open,peek,hidden", "allowed ways to lay offered Loot", (), "GC-P10"
    ),
)
SPECS: dict[str, OptionSpec] = {o.key: o for o in OPTIONS}


@dataclass(frozen=True, slots=True)
class Config:
    """The parsed options of one match."""

    copies: int = LOOT_COPIES
    first_boss_seat: int | None = None
    reveal_after_failed_vote: int = 2
    skims_per_round: int = 1
    stash_counts_public: bool = True
    skim_fuzz_failed_vote_extra_cards: bool = False
    turn_mode: bool = False
    public_change_limit: int = 3
    card_choice_limit: int = 5
    timeout_distribution: int = 90
    timeout_step3: int = 120
    timeout_turn: int = 30
    timeout_choose: int = 60
    timeout_action: int = 1  # VOTE_YES
    tiebreak_more_loot: bool = False
    payoff: bool = False
    tokens_per_player: int = 2
    payoff_cards_per_player: int = 5
    payoff_card_value: int = 1000
    gift_steps: frozenset[int] = frozenset({2, 3})
    offer_visibilities: frozenset[str] = frozenset(_OFFER_VIS)


def _bad(key: str, value: str, why: str) -> RuleViolation:
    """Every bad option is refused under GC-K01; the message names the rule the key belongs to."""
    rule = SPECS[key].rule if key in SPECS else "GC-K01"
    shown = value if len(value) <= _SHOWN else value[:_SHOWN] + "..."
    return RuleViolation("GC-K01", f"option {key}={shown!r} ({rule}): {why}")


def _whole(value: str, low: int, high: int) -> bool:
    """ASCII digits (not `str.isdigit`, which also takes "²") within low..high."""
    return bool(_DIGITS.fullmatch(value)) and low <= int(value) <= high


def normalize(options: Mapping[str, str]) -> dict[str, str]:
    """Every key with its value, defaults filled in; refuses unknown keys and bad values (GC-K01)."""
    out = {o.key: o.default for o in OPTIONS}
    for key, raw in options.items():
        if key not in SPECS:
            shown = key if len(key) <= _SHOWN else key[:_SHOWN] + "..."
            raise RuleViolation("GC-K01", f"unknown option {shown!r} (GC-K01)")
        value = str(raw).strip()
        if SPECS[key].choices == _BOOL:
            lowered = value.lower()
            if lowered in ("1", "yes", "on"):
                lowered = "true"
            elif lowered in ("0", "no", "off"):
                lowered = "false"
            value = lowered
        if key == "payoff.gift_steps":
            value = ",".join(sorted({s.strip() for s in value.split(",") if s.strip()}))
        if key == "payoff.offer_loot_visibility":
            parts = [s.strip() for s in value.split(",") if s.strip()]
            if not parts or any(p not in _OFFER_VIS for p in parts):
                raise _bad(key, value, f"a non-empty list of {', '.join(_OFFER_VIS)}")
            value = ",".join(v for v in _OFFER_VIS if v in parts)
        choices = SPECS[key].choices
        if choices and value not in choices:
            raise _bad(key, value, f"allowed: {', '.join(repr(c) for c in choices)}")
        if key.startswith("timeouts.") and not _whole(value, 1, MAX_TIMEOUT_S):
            raise _bad(key, value, f"a whole number of seconds from 1 to {MAX_TIMEOUT_S}")
        if key == "payoff.card_value" and not _whole(value, 0, MAX_PAYOFF_CARD_VALUE):
            raise _bad(key, value, f"a whole number of dollars from 0 to {MAX_PAYOFF_CARD_VALUE}")
        out[key] = value
    return out


def parse(options: Mapping[str, str], seats: int) -> Config:
    """A Config from string options; RuleViolation with the GC-K... id on bad values."""
    o = normalize(options)
    copies = int(o["loot_copies_per_value_and_type"])
    if copies * 5 < seats:
        raise _bad("loot_copies_per_value_and_type", str(copies), f"too few cards to deal {seats} Stashes")
    boss = o["first_boss_seat"]
    if boss and not 0 <= int(boss) < min(seats, MAX_PLAYERS):
        raise _bad("first_boss_seat", boss, f"no such seat among {seats}")
    action = {v: k for k, v in ACTION_KEYS.items()}[o["timeout_defaults.action"]]
    return Config(
        copies=copies,
        first_boss_seat=int(boss) if boss else None,
        reveal_after_failed_vote=int(o["reveal_after_failed_vote"]),
        skims_per_round=int(o["skims_per_round"]),
        stash_counts_public=o["stash_counts_public"] == "true",
        skim_fuzz_failed_vote_extra_cards=o["skim_fuzz_failed_vote_extra_cards"] == "true",
        turn_mode=o["step3_mode"] == "turns",
        public_change_limit=int(o["step3_public_change_limit"]),
        card_choice_limit=int(o["step3_card_choice_limit"]),
        timeout_distribution=int(o["timeouts.distribution_s"]),
        timeout_step3=int(o["timeouts.step3_s"]),
        timeout_turn=int(o["timeouts.turn_s"]),
        timeout_choose=int(o["timeouts.choose_s"]),
        timeout_action=action,
        tiebreak_more_loot=o["winner_tiebreak"] == "more_loot_cards",
        payoff=o["payoff.enabled"] == "true",
        tokens_per_player=int(o["payoff.tokens_per_player"]),
        payoff_cards_per_player=int(o["payoff.cards_per_player"]),
        payoff_card_value=int(o["payoff.card_value"]),
        gift_steps=frozenset(int(s) for s in o["payoff.gift_steps"].split(",") if s),
        offer_visibilities=frozenset(o["payoff.offer_loot_visibility"].split(",")),
    )


@lru_cache(maxsize=256)
def parse_items(items: tuple[tuple[str, str], ...], seats: int) -> Config:
    """`parse` for the normalized option pairs of a GameSetUp event, cached: every match with
    the same options shares one Config."""
    return parse(dict(items), seats)
