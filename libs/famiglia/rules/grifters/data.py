"""Grifters card, Job and constant tables (rules/grifters.md). Data only, no logic.

Every row names the rule it comes from. Replacing a placeholder card or Job is a change here only.
"""

from __future__ import annotations

from dataclasses import dataclass

BRAIN = "BRAIN"
SPEED = "SPEED"
BRAWN = "BRAWN"
SKILLS = (BRAIN, SPEED, BRAWN)  # GR-K01


@dataclass(frozen=True, slots=True)
class Card:
    """A Ringleader or a Specialist: one skill (GR-K01) and the effect code of its caper."""

    id: str
    name: str
    skill: str
    effect: str
    rule: str
    ringleader: bool = False
    order: int = 0  # canonical card order (GR-K02)


@dataclass(frozen=True, slots=True)
class RewardPart:
    """One part of a Job's reward (GR-J07, GR-J08): effect code and amount."""

    code: str
    amount: int


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    colour: str
    target: str
    mark: int  # player-count mark: the stack is in play when mark <= N (GR-S05)
    order: int  # 1 on top ... 4 at the bottom (GR-S06)
    name: str
    skills: tuple[tuple[str, int], ...]  # (skill, count), GR-J03
    reward: tuple[RewardPart, ...]
    rule: str = "GR-J02"


# -- Ringleaders (GR-K03): code, name, skill, effect --------------------------------------------
RINGLEADER_TYPES: tuple[tuple[str, str, str, str, str], ...] = (
    ("MM", "Mastermind", BRAIN, "mastermind", "GR-K04"),
    ("TH", "Thief", SPEED, "thief", "GR-K05"),
    ("PP", "Pickpocket", BRAWN, "pickpocket", "GR-K06"),
)
RINGLEADER_KEYS = {"mastermind": "MM", "thief": "TH", "pickpocket": "PP"}  # GR-F01 `ringleaders`

# -- Specialists (GR-K07): number, name, skill, effect code, rule --------------------------------
SPECIALIST_TYPES: tuple[tuple[int, str, str, str, str], ...] = (
    (1, "Inside Man", BRAIN, "inside_man", "GR-K08"),
    (2, "Recruiter", BRAIN, "recruiter", "GR-K09"),
    (3, "Informant", BRAIN, "informant", "GR-K10"),
    (4, "Forger", BRAIN, "forger", "GR-K11"),
    (5, "Fixer", BRAIN, "fixer", "GR-K12"),
    (6, "Con Artist", SPEED, "con_artist", "GR-K13"),
    (7, "Wheelman", SPEED, "wheelman", "GR-K14"),
    (8, "Femme Fatale", SPEED, "femme_fatale", "GR-K15"),
    (9, "Smuggler", SPEED, "smuggler", "GR-K16"),
    (10, "Cat Burglar", SPEED, "cat_burglar", "GR-K17"),
    (11, "Thug", BRAWN, "thug", "GR-K18"),
    (12, "Middle Man", BRAWN, "middle_man", "GR-K19"),
    (13, "Fall Guy", BRAWN, "fall_guy", "GR-K20"),
    (14, "Kidnapper", BRAWN, "kidnapper", "GR-K21"),
    (15, "Enforcer", BRAWN, "enforcer", "GR-K22"),
    (16, "Hitman", BRAWN, "hitman", "GR-K23"),
)
SPECIALIST_COPIES = 3  # GR-K07
MIN_SEATS = 2  # GR-S01
MAX_SEATS = 4


def _ringleaders() -> tuple[Card, ...]:
    out = []
    for seat in range(MAX_SEATS):
        for n, (code, name, skill, effect, rule) in enumerate(RINGLEADER_TYPES):
            out.append(Card(f"R{seat}-{code}", name, skill, effect, rule, True, seat * 3 + n))
    return tuple(out)


def _specialists() -> tuple[Card, ...]:
    out = []
    for nn, name, skill, effect, rule in SPECIALIST_TYPES:
        for c in range(1, SPECIALIST_COPIES + 1):
            out.append(Card(f"SP{nn:02d}-{c}", name, skill, effect, rule, False, 100 + nn * 10 + c))
    return tuple(out)


RINGLEADERS = _ringleaders()
SPECIALISTS = _specialists()  # 48, in canonical order (GR-K02)
CARDS: dict[str, Card] = {c.id: c for c in (*RINGLEADERS, *SPECIALISTS)}
CARD_ORDER: dict[str, int] = {c.id: c.order for c in CARDS.values()}
SKILL_OF: dict[str, str] = {c.id: c.skill for c in CARDS.values()}
EFFECT_OF: dict[str, str] = {c.id: c.effect for c in CARDS.values()}
IS_RINGLEADER: dict[str, bool] = {c.id: c.ringleader for c in CARDS.values()}
FALL_GUY = "fall_guy"


def _r(code: str, amount: int) -> RewardPart:
    return RewardPart(code, amount)


def _s(b: int, s: int, w: int) -> tuple[tuple[str, int], ...]:
    return ((BRAIN, b), (SPEED, s), (BRAWN, w))


# -- Jobs (GR-J02): 5 colours x 4 -----------------------------------------------------------------
COFFERS, ONE_OPPONENT, EACH_OPPONENT, DRAW = "coffers", "one_opponent", "each_opponent", "draw"
JOBS: tuple[Job, ...] = (
    Job("J-R1", "Red", "Government", 2, 1, "Bribe Customs Officials", _s(2, 1, 0), (_r(COFFERS, 3),)),
    Job("J-R2", "Red", "Government", 2, 2, "Forge Ration Permits", _s(1, 2, 1), (_r(COFFERS, 4),)),
    Job("J-R3", "Red", "Government", 2, 3, "Rig the Council Vote", _s(3, 1, 1), (_r(COFFERS, 5),)),
    Job("J-R4", "Red", "Government", 2, 4, "Raid the Treasury", _s(2, 2, 2), (_r(COFFERS, 6),)),
    Job("J-B1", "Blue", "Blackwatch Defence", 2, 1, "Kidnap Weapon Experts", _s(1, 0, 2), (_r(DRAW, 2),)),
    Job("J-B2", "Blue", "Blackwatch Defence", 2, 2, "Hijack Arms Shipment", _s(0, 2, 2), (_r(COFFERS, 4),)),
    Job("J-B3", "Blue", "Blackwatch Defence", 2, 3, "Sabotage Drone Plant", _s(1, 1, 3),
        (_r(COFFERS, 4), _r(DRAW, 1))),
    Job("J-B4", "Blue", "Blackwatch Defence", 2, 4, "Storm the Armory", _s(2, 1, 3), (_r(COFFERS, 6),)),
    Job("J-G1", "Green", "Rival Syndicates", 2, 1, "Hack Credit System", _s(0, 2, 1), (_r(ONE_OPPONENT, 2),)),
    Job("J-G2", "Green", "Rival Syndicates", 2, 2, "Shake Down Rival Fences", _s(0, 1, 3),
        (_r(ONE_OPPONENT, 3),)),
    Job("J-G3", "Green", "Rival Syndicates", 2, 3, "Frame a Rival Boss", _s(3, 2, 0), (_r(EACH_OPPONENT, 2),)),
    Job("J-G4", "Green", "Rival Syndicates", 2, 4, "Hostile Takeover", _s(2, 2, 2), (_r(EACH_OPPONENT, 3),)),
    Job("J-Y1", "Yellow", "Media corporation", 3, 1, "Blackmail a News Anchor", _s(2, 0, 1), (_r(COFFERS, 3),)),
    Job("J-Y2", "Yellow", "Media corporation", 3, 2, "Leak Broadcast Codes", _s(2, 2, 0), (_r(COFFERS, 4),)),
    Job("J-Y3", "Yellow", "Media corporation", 3, 3, "Kidnap a Pop Star", _s(1, 1, 3), (_r(COFFERS, 5),)),
    Job("J-Y4", "Yellow", "Media corporation", 3, 4, "Seize the Network", _s(3, 2, 1), (_r(COFFERS, 6),)),
    Job("J-P1", "Purple", "Banking corporation", 4, 1, "Skim Transit Accounts", _s(1, 2, 0), (_r(COFFERS, 3),)),
    Job("J-P2", "Purple", "Banking corporation", 4, 2, "Counterfeit Credit Chips", _s(2, 1, 1),
        (_r(COFFERS, 4),)),
    Job("J-P3", "Purple", "Banking corporation", 4, 3, "Empty the Safe-Deposit Vault", _s(1, 3, 1),
        (_r(COFFERS, 5),)),
    Job("J-P4", "Purple", "Banking corporation", 4, 4, "Crash the Exchange", _s(2, 3, 1),
        (_r(COFFERS, 5), _r(DRAW, 1))),
)
JOBS_BY_ID: dict[str, Job] = {j.id: j for j in JOBS}
COLOURS = ("Red", "Blue", "Green", "Yellow", "Purple")  # GR-S05 stack order

# -- Setup and scoring defaults (GR-S04, GR-E05, GR-F01), overridable through config.py -----------
COFFERS_BY_PLAYERS = {2: 50, 3: 65, 4: 75}  # GR-S04
ISK_TOKENS = 75  # GR-S03
START_ISK = 3  # GR-S08
START_SPECIALISTS = 3  # GR-S09
COLOUR_BONUS = {2: 2, 3: 4, 4: 8}  # GR-E05
CAT_BURGLAR_STEAL = (1, 4)  # GR-K17
MAX_ROUNDS = 100  # GR-E08
TIMEOUTS = (90, 30)  # GR-D06: play decision, follow-up choice (seconds)
