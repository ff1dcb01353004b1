"""Match options (GR-F01): keys, defaults, meaning, rule ids; parsed once into a frozen Config.

A bad value is refused with RuleViolation("GR-F01", ...) whose message starts with the rule the
option comes from; a bad seat count with GR-S01.

Options arrive as strings. Structured values use a compact text form ("2:50,3:65,4:75", "1-4",
"90,30"). Keys whose value is fixed by the data of this engine (the card and Job tables, the exact
match reading) list their only accepted value as `choices`, so a bad value is refused with GR-F01.

Every number is checked for its type (whole numbers are ASCII digits with an optional sign; seconds
are finite) and its range (the bounds below), so no option can overflow a field of the events.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from famiglia.engine import OptionSpec, RuleViolation

from . import data

BOOL = ("true", "false")

# Bounds of the numeric options (GR-F01). The events carry counts as int32: these keep every
# total far from overflow while leaving room well beyond the rulebook's values.
MAX_ISK = 10_000
"""ISK in the box (GR-S03), in any Coffers entry (GR-S04), a colour bonus (GR-E05) or a steal (GR-K17)."""
MAX_TIMEOUT_S = 86_400.0
"""A decision clock (GR-D06): at most a day."""
_WHOLE = re.compile(r"[+-]?[0-9]{1,18}")
_DECIMAL = re.compile(r"[0-9]{1,12}(\.[0-9]{1,9})?")
_SHOWN = 40


@dataclass(frozen=True, slots=True)
class Config:
    seats: int
    coffers_by_players: tuple[tuple[int, int], ...]
    isk_tokens: int
    start_isk: int
    start_specialists: int
    ringleaders: tuple[str, ...]  # codes MM/TH/PP
    marks_in_play: int  # the stacks whose mark is <= this are in play
    colour_bonus: tuple[tuple[int, int], ...]
    first_player_seat: int | None
    skip_first_advance: bool
    extra_advance_on_first_turn: bool
    empty_hand_token: bool
    hideout_tokens_score: bool
    job_card_moves_before_reward: bool
    fall_guy_may_copy_fall_guy: bool
    cat_burglar_min: int
    cat_burglar_max: int
    tiebreak: tuple[str, ...]
    count_ringleaders_in_tiebreak: bool
    play_timeout: float
    choice_timeout: float
    max_rounds: int
    auto_single_option: bool

    @property
    def starting_coffers(self) -> int:
        return dict(self.coffers_by_players)[self.seats]

    def bonus(self, jobs_of_colour: int) -> int:
        best = 0
        for count, value in self.colour_bonus:
            if jobs_of_colour >= count:
                best = max(best, value)
        return best


def _int(text: str) -> int:
    """A whole number in ASCII digits (no exponent, no digits of other scripts)."""
    text = text.strip()
    if not _WHOLE.fullmatch(text):
        raise ValueError(text)
    return int(text)


def _seconds(text: str) -> float:
    """Seconds in plain decimal: no sign, exponent, nan or inf."""
    text = text.strip()
    if not _DECIMAL.fullmatch(text):
        raise ValueError(text)
    return float(text)


def _pairs(text: str) -> tuple[tuple[int, int], ...]:
    out = []
    for part in text.split(","):
        k, v = part.split(":")
        out.append((_int(k), _int(v)))
    if len({k for k, _ in out}) != len(out):
        raise ValueError(text)
    return tuple(sorted(out))


def _range(text: str) -> tuple[int, int]:
    lo, hi = text.split("-")
    return _int(lo), _int(hi)


def _show(text: str) -> str:
    """The value as a message quotes it: long values cut short."""
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


def _bool(text: str) -> bool:
    if text not in BOOL:
        raise ValueError(text)
    return text == "true"


@dataclass(frozen=True, slots=True)
class _Key:
    spec: OptionSpec
    parse: Callable[[str], object]


def _k(key: str, default: str, description: str, rule: str, parse: Callable[[str], object] = str,
       choices: tuple[str, ...] = ()) -> _Key:
    return _Key(OptionSpec(key, default, description, choices, rule), parse)


KEYS: tuple[_Key, ...] = (
    _k("players", "2-4", "allowed player counts (found S6)", "GR-S01", choices=("2-4",)),
    _k("coffers_by_players", "2:50,3:65,4:75", "ISK in the Coffers before the players take theirs",
       "GR-S04", _pairs),
    _k("isk_tokens", "75", "ISK tokens in the box", "GR-S03", _int),
    _k("start_isk_from_coffers", "3", "ISK each player takes from the Coffers", "GR-S08", _int),
    _k("start_specialists", "3", "Specialists dealt to each player", "GR-S09", _int),
    _k("ringleaders", "mastermind,thief,pickpocket", "Ringleaders each player starts with", "GR-S07",
       lambda t: tuple(data.RINGLEADER_KEYS[x] for x in t.split(",") if x)),
    _k("specialist_types", "16", "Specialist types (the table of GR-K07)", "GR-K07", choices=("16",)),
    _k("specialist_copies", "3", "copies of each Specialist type", "GR-K07", choices=("3",)),
    _k("job_marks_in_play", "by_players", "stacks in play: marks up to N (2+, 3+, 4+)", "GR-S05",
       choices=("by_players",)),
    _k("colour_bonus", "2:2,3:4,4:8", "bonus by Jobs of one colour", "GR-E05", _pairs),
    _k("first_player_seat", "", "first player's seat; empty = random with the match rng", "GR-S12"),
    _k("skip_first_advance", "true", "Phase 1 is skipped on each player's first turn", "GR-R04", _bool,
       BOOL),
    _k("extra_advance_on_first_turn", "true", "a card's extra Advance Time also on the first turn",
       "GR-R05", _bool, BOOL),
    _k("empty_hand_token", "true", "an empty hand puts 1 ISK on Night One", "GR-R07", _bool, BOOL),
    _k("empty_hand_empty_stash", "nothing", "empty hand and Stash: nothing happens", "GR-R08",
       choices=("nothing",)),
    _k("hideout_tokens_score", "false", "ISK tokens in the Hideout score for their owner", "GR-E06",
       _bool, BOOL),
    _k("job_card_moves_before_reward", "true", "the Job card moves before the reward is paid", "GR-J06",
       _bool, BOOL),
    _k("job_match", "exact_multiset", "Team skills equal the Job's icons as multisets", "GR-J03",
       choices=("exact_multiset",)),
    _k("femme_fatale_second_play", "caper_only", "the Femme Fatale's second play is a caper", "GR-K15",
       choices=("caper_only",)),
    _k("fall_guy_may_copy_fall_guy", "false", "a Fall Guy may copy another Fall Guy", "GR-K20", _bool,
       BOOL),
    _k("cat_burglar_steal", "1-4", "Cat Burglar steals within min-max", "GR-K17", _range),
    _k("discard_pile_public", "true", "the discard pile is face up", "GR-H06", choices=("true",)),
    _k("end_check", "after_every_step", "when the end conditions are checked", "GR-E02",
       choices=("after_every_step",)),
    _k("tiebreak", "most_jobs,fewest_specialists", "tie-breakers after the score, in order", "GR-T01",
       lambda t: tuple(x for x in t.split(",") if x)),
    _k("count_ringleaders_in_tiebreak", "false", "Ringleaders count as Specialists in the tie-break",
       "GR-T02", _bool, BOOL),
    _k("timeouts", "90,30", "seconds for the play decision and each follow-up choice (0: no clock)", "GR-D06",
       lambda t: tuple(_seconds(x) for x in t.split(","))),
    _k("max_rounds", "100", "round limit", "GR-E08", _int),
    _k("timeout_play", "first_card_in_hand_order_as_caper", "what a play timeout does", "GR-D06",
       choices=("first_card_in_hand_order_as_caper",)),
    _k("auto_single_option", "true", "a compulsory choice with one option is made without asking",
       "GR-D04", _bool, BOOL),
)
OPTIONS: tuple[OptionSpec, ...] = tuple(k.spec for k in KEYS)
TIEBREAKS = ("most_jobs", "fewest_specialists")


def normalize(options: Mapping[str, str]) -> dict[str, str]:
    """Every option key with its value, defaults filled in; unknown keys refused (GR-F01)."""
    specs = {k.spec.key: k.spec for k in KEYS}
    unknown = sorted(set(options) - set(specs))
    if unknown:
        raise RuleViolation("GR-F01", f"unknown option(s) {', '.join(unknown)}")
    return {key: str(options.get(key, spec.default)) for key, spec in specs.items()}


def parse(seats: int, options: Mapping[str, str]) -> Config:
    """A validated Config; RuleViolation with the option's rule id on a bad value."""
    if not data.MIN_SEATS <= seats <= data.MAX_SEATS:
        raise RuleViolation("GR-S01", f"Grifters is for 2 to 4 players, not {seats}")
    raw = normalize(options)
    values: dict[str, object] = {}
    for key in KEYS:
        text = raw[key.spec.key]
        if key.spec.choices and text not in key.spec.choices:
            raise RuleViolation("GR-F01", f"{key.spec.rule}: {key.spec.key}={_show(text)}: expected one of "
                                          f"{key.spec.choices}")
        try:
            values[key.spec.key] = key.parse(text)
        except (ValueError, KeyError, TypeError):
            raise RuleViolation("GR-F01", f"{key.spec.rule}: {key.spec.key}={_show(text)} is not a valid value") from None
    cfg = _build(seats, values)
    _check(cfg)
    return cfg


def _build(seats: int, v: dict[str, object]) -> Config:
    fps = str(v["first_player_seat"])
    try:
        first = _int(fps) if fps else None
    except ValueError:
        raise RuleViolation("GR-F01", f"GR-S12: first_player_seat={_show(fps)} is not a seat") from None
    cat = v["cat_burglar_steal"]
    timeouts = v["timeouts"]
    assert isinstance(cat, tuple) and isinstance(timeouts, tuple)
    if len(timeouts) != 2:
        raise RuleViolation("GR-F01", "GR-D06: timeouts needs two values: play,choice")
    return Config(
        seats=seats,
        coffers_by_players=v["coffers_by_players"],  # type: ignore[arg-type]
        isk_tokens=v["isk_tokens"],  # type: ignore[arg-type]
        start_isk=v["start_isk_from_coffers"],  # type: ignore[arg-type]
        start_specialists=v["start_specialists"],  # type: ignore[arg-type]
        ringleaders=v["ringleaders"],  # type: ignore[arg-type]
        marks_in_play=seats,
        colour_bonus=v["colour_bonus"],  # type: ignore[arg-type]
        first_player_seat=first,
        skip_first_advance=v["skip_first_advance"],  # type: ignore[arg-type]
        extra_advance_on_first_turn=v["extra_advance_on_first_turn"],  # type: ignore[arg-type]
        empty_hand_token=v["empty_hand_token"],  # type: ignore[arg-type]
        hideout_tokens_score=v["hideout_tokens_score"],  # type: ignore[arg-type]
        job_card_moves_before_reward=v["job_card_moves_before_reward"],  # type: ignore[arg-type]
        fall_guy_may_copy_fall_guy=v["fall_guy_may_copy_fall_guy"],  # type: ignore[arg-type]
        cat_burglar_min=cat[0],
        cat_burglar_max=cat[1],
        tiebreak=v["tiebreak"],  # type: ignore[arg-type]
        count_ringleaders_in_tiebreak=v["count_ringleaders_in_tiebreak"],  # type: ignore[arg-type]
        play_timeout=timeouts[0],
        choice_timeout=timeouts[1],
        max_rounds=v["max_rounds"],  # type: ignore[arg-type]
        auto_single_option=v["auto_single_option"],  # type: ignore[arg-type]
    )


def _check(c: Config) -> None:
    if not 1 <= c.isk_tokens <= MAX_ISK:
        raise RuleViolation("GR-F01", f"GR-S03: isk_tokens must be between 1 and {MAX_ISK}")
    coffers = dict(c.coffers_by_players)
    if any(not data.MIN_SEATS <= n <= data.MAX_SEATS or not 0 <= isk <= MAX_ISK for n, isk in coffers.items()):
        raise RuleViolation("GR-F01", f"GR-S04: coffers_by_players maps {data.MIN_SEATS}..{data.MAX_SEATS} players "
                                      f"to 0..{MAX_ISK} ISK")
    if c.seats not in coffers:
        raise RuleViolation("GR-F01", f"GR-S04: coffers_by_players has no entry for {c.seats} players")
    if coffers[c.seats] > c.isk_tokens:
        raise RuleViolation("GR-F01", "GR-S03: the Coffers cannot hold more ISK than the box")
    if not 0 <= c.start_isk or c.start_isk * c.seats >= coffers[c.seats]:
        raise RuleViolation("GR-F01", "GR-S08: the starting ISK must leave the Coffers non-empty (GR-E03)")
    if not 0 <= c.start_specialists or c.start_specialists * c.seats >= len(data.SPECIALISTS):
        raise RuleViolation("GR-F01", "GR-S09: the deal must leave cards in the deck (GR-E03)")
    if len(set(c.ringleaders)) != len(c.ringleaders):
        raise RuleViolation("GR-F01", "GR-S07: each Ringleader at most once")
    if c.first_player_seat is not None and not 0 <= c.first_player_seat < c.seats:
        raise RuleViolation("GR-F01", f"GR-S12: first_player_seat {c.first_player_seat} is not a seat")
    if not 0 <= c.cat_burglar_min <= c.cat_burglar_max <= MAX_ISK:
        raise RuleViolation("GR-F01", f"GR-K17: cat_burglar_steal needs 0 <= min <= max <= {MAX_ISK}")
    if any(t not in TIEBREAKS for t in c.tiebreak) or len(set(c.tiebreak)) != len(c.tiebreak):
        raise RuleViolation("GR-F01", f"GR-T01: tiebreak: a list of distinct {TIEBREAKS}")
    if not 1 <= c.max_rounds <= data.MAX_ROUNDS:
        raise RuleViolation("GR-F01", f"GR-E08: max_rounds must be between 1 and {data.MAX_ROUNDS} (the step bound of INFO)")
    if any(not 0 <= count <= len(data.JOBS) or not 0 <= value <= MAX_ISK for count, value in c.colour_bonus):
        raise RuleViolation("GR-F01", f"GR-E05: colour_bonus maps 0..{len(data.JOBS)} Jobs to 0..{MAX_ISK}")
    if not (0 <= c.play_timeout <= MAX_TIMEOUT_S and 0 <= c.choice_timeout <= MAX_TIMEOUT_S):
        raise RuleViolation("GR-F01", f"GR-D06: timeouts are between 0 and {MAX_TIMEOUT_S:.0f} seconds")


@lru_cache(maxsize=256)
def parse_items(seats: int, items: tuple[tuple[str, str], ...]) -> Config:
    """`parse` for option pairs, cached: every match with the same options shares one Config
    (setup and the first event of every fold parse them)."""
    return parse(seats, dict(items))
