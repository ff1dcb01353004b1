"""Match options (NC-K90): keys, defaults and the rule each one comes from.

Options arrive as strings; `Config.parse` validates them and refuses bad values
with a RuleViolation naming NC-K90. Numbers are ASCII digits (an optional minus sign for the
Jury Box) within the bounds below, every key checked whatever the player count.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from famiglia.engine import RuleViolation
from famiglia.engine.protocol import OptionSpec

_BOOL = ("true", "false")
VERDICT_START_RANGE = (-20, 20)
"""NC-V03: a Jury Box start V (the [default] starts are 2, 2 and 3; the seed gives no values)."""
MAX_TIMEOUT_S = 86_400
"""NC-D02: a clock, at most a day."""
_WHOLE = re.compile(r"-?[0-9]{1,12}")
_SHOWN = 40


def _show(value: str) -> str:
    """A value as a message quotes it: long values cut short."""
    return repr(value if len(value) <= _SHOWN else value[:_SHOWN] + "...")

OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("first_player_seat", "random", "seat holding the First Player card, or random",
               ("random", "0", "1", "2", "3", "4"), "NC-S16"),
    OptionSpec("verdict_start_3", "2", "Jury Box start V with 3 players", (), "NC-V03"),
    OptionSpec("verdict_start_4", "2", "Jury Box start V with 4 players", (), "NC-V03"),
    OptionSpec("verdict_start_5", "3", "Jury Box start V with 5 players", (), "NC-V03"),
    OptionSpec("verdict_count_mode", "icons", "how Corruption Pile Notes move the token",
               ("icons", "value_weighted"), "NC-V05"),
    OptionSpec("verdict_tie_result", "guilty", "the verdict when V = 0", ("guilty", "innocent"), "NC-V06"),
    OptionSpec("zealous_needs_titles_given", "false", "Zealous Corruptor only once Titles are given",
               _BOOL, "NC-S12"),
    OptionSpec("zealous_from_month", "4", "first month a Zealous Corruptor is taken",
               ("1", "2", "3", "4", "5", "6"), "NC-T02"),
    OptionSpec("turfs_free_in_reception", "true", "Reception step 1 also frees Turfs", _BOOL, "NC-C03"),
    OptionSpec("title_counts_as_meeting_win", "true", "a Title received counts as winning a card",
               _BOOL, "NC-M14"),
    OptionSpec("end_game_bonus_respect", "2", "Respect per End of Game Bonus card",
               ("0", "1", "2", "3"), "NC-V14"),
    OptionSpec("two_colour_turf_respect", "1", "Respect of Connecticut and New Jersey",
               ("0", "1", "2", "3"), "NC-K04"),
    OptionSpec("investigation_win_respect", "1", "Respect per Investigation won", ("0", "1", "2", "3"),
               "NC-M10"),
    OptionSpec("zealous_cards", "3", "number of Zealous Corruptor cards", ("0", "1", "2", "3"), "NC-K21"),
    OptionSpec("zealous_respect", "1", "Respect per Zealous Corruptor card", ("0", "1", "2", "3"), "NC-K21"),
    OptionSpec("turn_timeout_s", "120", "turn clock in seconds (0: none)", (), "NC-D02"),
    OptionSpec("choice_timeout_s", "45", "choice clock in seconds (0: none)", (), "NC-D02"),
    # NC-K90 keys this engine fixes: listed so that ListGames shows them, one choice each.
    OptionSpec("months", "6", "months before the Final Verdict", ("6",), "NC-R01"),
    OptionSpec("street_spaces", "4", "Street spaces", ("4",), "NC-K60"),
    OptionSpec("cashin_limits", "racket:1,per_traffic_icon:1", "cash-ins per Business",
               ("racket:1,per_traffic_icon:1",), "NC-B14"),
    OptionSpec("cashin_active_sees_drawn_notes", "true", "the active player sees the drawn faces",
               ("true",), "NC-B09"),
    OptionSpec("forced_shortfall_cheats", "true", "a Raid or empty supply still Cheats", ("true",), "NC-B10"),
    OptionSpec("investigation_bids", "always_revealed", "Investigation bids revealed and discarded",
               ("always_revealed",), "NC-M12"),
    OptionSpec("underboss_full_street", "replace_highest_non_investigation",
               "where the Underboss goes on a full Street", ("replace_highest_non_investigation",), "NC-C07"),
    OptionSpec("verdict_clamp", "none", "bounds of the Jury Box", ("none",), "NC-V03"),
    OptionSpec("guilty_without_snitch", "nobody_wins", "GUILTY and no Snitch", ("nobody_wins",), "NC-V10"),
    OptionSpec("end_game_bonus_tie", "nobody", "a tied End of Game Bonus", ("nobody",), "NC-V14"),
    OptionSpec("winner_tiebreak", "highest_title,bank_value,shared", "ties for the win",
               ("highest_title,bank_value,shared",), "NC-V15"),
    OptionSpec("vendetta_draws", "only_when_cheated", "when Vendetta cards are drawn",
               ("only_when_cheated",), "NC-K43"),
)


@dataclass(frozen=True, slots=True)
class Config:
    seats: int
    first_player_seat: int  # -1 = random (NC-S16)
    verdict_start: int
    value_weighted: bool
    tie_innocent: bool
    zealous_needs_titles: bool
    zealous_from_month: int
    turfs_free_in_reception: bool
    title_counts_as_win: bool
    bonus_respect: int
    two_colour_respect: int
    investigation_respect: int
    zealous_cards: int
    zealous_respect: int
    turn_timeout: float
    choice_timeout: float

    @staticmethod
    def parse(seats: int, options: Mapping[str, str]) -> Config:
        """Validate the options (NC-K90) for `seats` players (NC-S01)."""
        if seats not in (3, 4, 5):
            raise RuleViolation("NC-S01", f"Nostra City needs 3 to 5 players, not {seats}")
        known = {o.key: o for o in OPTIONS}
        values = {o.key: o.default for o in OPTIONS}
        for key, value in options.items():
            spec = known.get(key)
            if spec is None:
                raise RuleViolation("NC-K90", f"unknown option {_show(str(key))}")
            if spec.choices and value not in spec.choices:
                raise RuleViolation("NC-K90", f"option {key}={_show(str(value))} not in {spec.choices}")
            values[key] = str(value)

        def integer(key: str, low: int, high: int) -> int:
            text = values[key].strip()
            if not _WHOLE.fullmatch(text):
                raise RuleViolation("NC-K90", f"option {key}={_show(values[key])} must be a whole number "
                                              f"within {low}..{high}")
            n = int(text)
            if not low <= n <= high:
                raise RuleViolation("NC-K90", f"option {key} must be within {low}..{high}")
            return n

        # Every player count's start V is checked, not only this match's: the options are
        # recorded whole, so a value that is wrong for another table size is wrong here too.
        starts = {n: integer(f"verdict_start_{n}", *VERDICT_START_RANGE) for n in (3, 4, 5)}

        fp = values["first_player_seat"]
        first = -1 if fp == "random" else int(fp)
        if first >= seats:
            raise RuleViolation("NC-S16", f"first player seat {first} is not a seat")
        return Config(
            seats=seats,
            first_player_seat=first,
            verdict_start=starts[seats],
            value_weighted=values["verdict_count_mode"] == "value_weighted",
            tie_innocent=values["verdict_tie_result"] == "innocent",
            zealous_needs_titles=values["zealous_needs_titles_given"] == "true",
            zealous_from_month=int(values["zealous_from_month"]),
            turfs_free_in_reception=values["turfs_free_in_reception"] == "true",
            title_counts_as_win=values["title_counts_as_meeting_win"] == "true",
            bonus_respect=int(values["end_game_bonus_respect"]),
            two_colour_respect=int(values["two_colour_turf_respect"]),
            investigation_respect=int(values["investigation_win_respect"]),
            zealous_cards=int(values["zealous_cards"]),
            zealous_respect=int(values["zealous_respect"]),
            turn_timeout=float(integer("turn_timeout_s", 0, MAX_TIMEOUT_S)),
            choice_timeout=float(integer("choice_timeout_s", 0, MAX_TIMEOUT_S)),
        )
