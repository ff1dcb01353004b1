"""Nothing Personal data tables (rules/nothing-personal.md, Tables A-H), with rule ids.

No logic beyond loading and validating (NP-S4). The gangster list (Table G) and the
influence card list (Table H) are synthetic placeholders, kept in `data/*.toml` so
the real lists replace them without a code change.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from famiglia.engine import RuleViolation

DATA_DIR = Path(__file__).parent / "data"

# -- Table A: constants -------------------------------------------------------------------
ROUNDS = 5                      # NP-R1
FAMILY_MARKERS = 25             # NP-S1
NEUTRAL_MARKERS = 25            # NP-S3
BLACKMAIL_COINS = 8             # NP-S3
OMERTA_COINS = 2                # NP-S3
START_MONEY = 5                 # NP-S1
START_HAND = 4                  # NP-S8
SETUP_LAPS = 3                  # NP-S10
SHAKEDOWN_PRICE = 8             # NP-M1
CHAT_TEXT_MOST = 500            # NP-M7 [default]: a chat message's characters
FENCE_PRICE = 10                # NP-F4
FENCE_DRAWS = (4, 3, 2)         # NP-F2: 0 / 1 / 2+ strictly controlled gangsters
REROLL_PRICE = 10               # NP-W44
CREW_SURCHARGE = 5              # NP-C21
EXTRA_PRICE = 5                 # NP-C19
CAPO_WHACK_SURCHARGE = 10       # NP-W31
STEAL = 3                       # NP-W26
SWING = 4                       # NP-W36, NP-W41
ARREST_LIMIT = {3: 9, 4: 10, 5: 11}   # NP-P1
SNITCH_THRESHOLD = 10           # NP-C29
RESIST_THRESHOLD = 12           # NP-C30, NP-P2 [default]
CARD_VALUE_AT_END = 8           # NP-E2
MONEY_PER_RESPECT = 10          # NP-E3
BLACKMAIL_PROPOSALS = 3         # NP-W19 [default]
OFFER_IDS = 999_999             # NP-H7 [default]: offer ids are drawn from 1..OFFER_IDS, never counted
COLOURS = ("purple", "brown", "orange", "black", "grey")   # NP-S2
MONEY_TOKENS = {1: 50, 5: 20, 10: 10}   # NP-M2: cosmetic, the bank never runs out

# Timeouts in seconds per decision (NP-D3 to NP-D14) [default]
TIMEOUTS = {
    "setup": 30.0, "commission": 60.0, "card_window": 20.0, "reroll_window": 15.0, "ruling": 30.0,
    "action": 60.0, "blackmail": 30.0, "invite": 30.0, "buy": 30.0, "vacancy": 30.0,
    # NP-D7, NP-H9: a standing auto-pass runs the seat's window clock down at once, so its pass is the
    # seat's own timeout command (0 would mean "no clock"). Only that seat sees its row (Pending.private).
    "auto_pass": 0.01,
}

# -- Table E: dice ------------------------------------------------------------------------------
MOVE_DIE = ("ring", "2", "3", "4", "5", "knife")
WHACK_DIE = ("ring", "pistol", "two_pistols", "long_gun", "X", "knife")
NUMBER_DIE = ("1", "2", "3", "4", "5", "6")
DICE = {"move": MOVE_DIE, "whack": WHACK_DIE, "number": NUMBER_DIE}
WHACK_SUCCESS = frozenset({"ring", "pistol", "two_pistols", "long_gun"})   # NP-W40


# -- Table B: positions -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Modifier:
    """NP-W10: `+k` adds k to the printed value, `xk` multiplies it by k."""

    op: str  # "+" or "x"
    k: int

    def apply(self, printed: int) -> int:
        return printed + self.k if self.op == "+" else printed * self.k


@dataclass(frozen=True, slots=True)
class Position:
    number: int
    name: str
    respect: Modifier
    money: Modifier
    ability: str
    arrows: tuple[int, ...]        # Table C (NP-W33, NP-W34)
    sources: tuple[int, ...]       # Table D tier-1 sources; 10..12 are A1..A3 (NP-Y4)
    decider: int                   # Table D decider position, 0 = none (NP-Y5)


def _m(s: str) -> Modifier:
    return Modifier("x", int(s[1:])) if s[0] == "x" else Modifier("+", int(s))


A1, A2, A3 = 10, 11, 12
POSITIONS: dict[int, Position] = {
    9: Position(9, "Capo", _m("+4"), _m("+4"), "TAKE_RING", (), (), 0),
    8: Position(8, "Underboss", _m("+3"), _m("+3"), "DRAW_1", (9,), (7, 6, 5), 9),
    7: Position(7, "Counselor", _m("x2"), _m("+3"), "NEUTRAL_3", (8, 9), (5, 4), 9),   # NP-W12
    6: Position(6, "Enforcer", _m("+2"), _m("+2"), "PLACE_OWN_1", (8,), (5, 3, 2), 8),
    5: Position(5, "Racketeer", _m("+2"), _m("+1"), "SWAP_2", (6, 7, 8), (4, 2, 1), 8),
    4: Position(4, "Bean Counter", _m("+1"), _m("x2"), "STEAL_3", (5, 7), (A1, A2, A3), 7),
    3: Position(3, "First Guy", _m("+1"), _m("+1"), "REMOVE_1", (6,), (2, A1, A2, A3), 6),
    2: Position(2, "Second Guy", _m("+0"), _m("+2"), "OMERTA", (3, 5, 6), (1, A1, A2, A3), 6),
    1: Position(1, "Third Guy", _m("+1"), _m("+0"), "WHACK_10", (2, 5), (A1, A2, A3), 5),
}

# -- Table F: effect and ability codes with their kinds -------------------------------------------
CODE_KINDS: dict[str, frozenset[str]] = {
    "TAKE_RING": frozenset({"position"}),
    "DRAW_1": frozenset({"position"}),
    "NEUTRAL_3": frozenset({"position", "card"}),
    "PLACE_OWN_1": frozenset({"position"}),
    "SWAP_2": frozenset({"position", "action"}),
    "STEAL_3": frozenset({"position"}),
    "REMOVE_1": frozenset({"position"}),
    "OMERTA": frozenset({"position"}),
    "WHACK_10": frozenset({"position"}),
    "PLACE_OWN_2": frozenset({"action"}),
    "REMOVE_2": frozenset({"action", "card"}),
    "SQUEEZE_4": frozenset({"action"}),
    "MOVE_ANY_HIGHER": frozenset({"action"}),
    "WHACK_5": frozenset({"action"}),
    "WHACK_LOWER_FREE": frozenset({"action"}),
    "SKIM_5": frozenset({"action"}),
    "DRAW_2": frozenset({"action", "card"}),
    "BLACKMAIL_OWN": frozenset({"action"}),
    "TAX_EACH_2": frozenset({"action"}),
    "MOVE_OWN_2": frozenset({"action"}),
    "DICE_MONEY": frozenset({"action"}),
    "DICE_RESPECT": frozenset({"action"}),
    "DOUBLE_OR_NOTHING": frozenset({"action"}),
    "MOVE_BONUS": frozenset({"passive"}),
    "PRISON_RESIST": frozenset({"passive"}),
    "WHACK_FREE_REROLL": frozenset({"passive"}),
    "OMERTA_IMMUNE": frozenset({"passive"}),
    "FREE_REROLL": frozenset({"passive"}),
    "EXTRA_5": frozenset({"card"}),
    "BLACKMAIL_COIN": frozenset({"card"}),
    "SNITCH": frozenset({"card"}),
    "TAKE_6": frozenset({"card"}),
    "MOVE_OWN_1": frozenset({"card"}),
    "ASSOCIATE_SWAP": frozenset({"card"}),
    "JOINT_2": frozenset({"card"}),
    "INVITE_1": frozenset({"card"}),
}
WHACK_CODES = frozenset({"WHACK_10", "WHACK_5", "WHACK_LOWER_FREE"})
MOVE_CODES = frozenset({"MOVE_ANY_HIGHER"})
OWN_PLAY_CODES = frozenset({"EXTRA_5", "BLACKMAIL_COIN"})   # NP-C32: never with OR

TYPES = ("thug", "hitman", "conman", "gambler")              # NP-C5
ICONS = frozenset(TYPES) | {"any"} | {f"pos{p}" for p in range(1, 10)}   # NP-C5, NP-C6
KEYWORDS = frozenset({"none", "blank", "AND", "OR"})         # NP-C10
TIMINGS = frozenset({"commission", "crew", "anytime"})       # NP-C21, NP-C22


# -- Tables G and H: cards ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Gangster:
    id: str
    name: str
    types: frozenset[str]
    respect: int
    money: int
    ability: str
    start_capo: bool = False


@dataclass(frozen=True, slots=True)
class Group:
    icon: str
    count: int


@dataclass(frozen=True, slots=True)
class InfluenceCard:
    id: str
    set: str
    groups: tuple[Group, ...]
    keyword: str
    timing: str
    effect: str


def _gangster(r: dict) -> Gangster:
    """One Table G row (NP-S4): known types, an action or passive ability code (NP-C32)."""
    types = frozenset(r.get("types", ()))
    if not types <= set(TYPES):
        raise RuleViolation("NP-S4", f"{r['id']}: unknown type in {sorted(types)}")
    ability = r.get("ability", "")
    if ability and not (CODE_KINDS.get(ability, frozenset()) & {"action", "passive"}):
        raise RuleViolation("NP-C32", f"{r['id']}: {ability} is not an action or passive code")
    return Gangster(r["id"], r["name"], types, int(r["respect"]), int(r["money"]), ability,
                    bool(r.get("start_capo", False)))


def load_gangsters(rows: list[dict]) -> tuple[Gangster, ...]:
    """NP-S4: exactly one starting Capo; known types and codes (action or passive, NP-C32)."""
    out = [_gangster(r) for r in rows]
    if sum(g.start_capo for g in out) != 1:
        raise RuleViolation("NP-S4", "the gangster list needs exactly one starting Capo")
    if len({g.id for g in out}) != len(out):
        raise RuleViolation("NP-S4", "duplicate gangster id")
    return tuple(out)


def load_influence(rows: list[dict]) -> tuple[InfluenceCard, ...]:
    """NP-S4: known icons, keywords, timings and effect codes; NP-C10 and NP-C32 pairing."""
    out = []
    for r in rows:
        groups = []
        for g in r.get("groups", ()):
            icon, _, count = g.partition(":")
            if icon not in ICONS or not count.isdigit() or int(count) < 1:
                raise RuleViolation("NP-S4", f"{r['id']}: bad icon group {g!r}")
            groups.append(Group(icon, int(count)))
        if not groups:
            raise RuleViolation("NP-S4", f"{r['id']}: a card needs at least one icon group")
        kw, timing, effect = r["keyword"], r["timing"], r.get("effect", "")
        if kw not in KEYWORDS or timing not in TIMINGS:
            raise RuleViolation("NP-S4", f"{r['id']}: unknown keyword or timing")
        if effect and "card" not in CODE_KINDS.get(effect, frozenset()):
            raise RuleViolation("NP-C32", f"{r['id']}: {effect} is not a card code")
        if (kw == "none") != (effect == ""):
            raise RuleViolation("NP-C10", f"{r['id']}: keyword {kw} and effect {effect!r} do not pair")
        if kw == "OR" and effect in OWN_PLAY_CODES:
            raise RuleViolation("NP-C32", f"{r['id']}: {effect} never pairs with OR")
        out.append(InfluenceCard(r["id"], r["set"], tuple(groups), kw, timing, effect))
    if len({c.id for c in out}) != len(out):
        raise RuleViolation("NP-S4", "duplicate influence card id")
    return tuple(out)


def _read(name: str, key: str) -> list[dict]:
    with open(DATA_DIR / name, "rb") as fh:
        return list(tomllib.load(fh)[key])


GANGSTERS: tuple[Gangster, ...] = load_gangsters(_read("gangsters.toml", "gangster"))
INFLUENCE: tuple[InfluenceCard, ...] = load_influence(_read("influence.toml", "card"))
G: dict[str, Gangster] = {g.id: g for g in GANGSTERS}
GIDX: dict[str, int] = {g.id: i for i, g in enumerate(GANGSTERS)}
CARD: dict[str, InfluenceCard] = {c.id: c for c in INFLUENCE}
START_CAPO: str = next(g.id for g in GANGSTERS if g.start_capo)   # NP-S5


# -- NP-V7: expansion gangster sets ---------------------------------------------------------------
SET_SIZE = 18
# The installed sets, by name (`set_name`), filled by `expansions.install` when the engine is loaded:
# their cards join `G` and `GIDX` (after the base cards, so base indices never move); a match deals
# only the sets its `expansions` option names. A set whose file was refused is kept with the reason.
SETS: dict[str, tuple[Gangster, ...]] = {}
REFUSED: dict[str, str] = {}


def set_name(name: str) -> str:
    """A set's name as the option and the file name spell it: "Young Turks" -> young_turks."""
    return "_".join(name.replace("-", " ").replace("_", " ").lower().split())


def load_set(name: str, rows: list[dict]) -> tuple[Gangster, ...]:
    """NP-V7: an expansion set is 18 Table G rows (NP-S4 checks), no starting Capo, ids new to the
    table (not a base card nor a card of an installed set)."""
    out = tuple(_gangster(r) for r in rows)
    if len(out) != SET_SIZE:
        raise RuleViolation("NP-V7", f"expansion set {name}: {len(out)} gangsters, not {SET_SIZE}")
    if any(g.start_capo for g in out):
        raise RuleViolation("NP-V7", f"expansion set {name}: only the base list has the starting Capo")
    ids = [g.id for g in out]
    taken = sorted(i for i in ids if i in G)
    if len(set(ids)) != len(ids) or taken:
        raise RuleViolation("NP-V7", f"expansion set {name}: duplicate gangster id {taken or ids}")
    return out


def add_set(name: str, cards: tuple[Gangster, ...]) -> None:
    """Install a loaded set: its cards get the next indices of the marker table."""
    for g in cards:
        GIDX[g.id] = len(GIDX)
        G[g.id] = g
    SETS[name] = cards
    REFUSED.pop(name, None)


def match_gangsters(expansions: tuple[str, ...]) -> tuple[Gangster, ...]:
    """The gangster cards of a match (NP-S5, NP-V7): the base list, then each named set in order."""
    if not expansions:
        return GANGSTERS
    return GANGSTERS + tuple(g for name in expansions for g in SETS[name])


def marker_slots(expansions: tuple[str, ...]) -> int:
    """Length of a match's per-gangster marker table: every card of the match has its index in it."""
    return 1 + max(GIDX[g.id] for g in match_gangsters(expansions))
