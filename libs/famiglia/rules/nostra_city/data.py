"""Nostra City card and constant tables (NC-K05, K11, K14, K22, K32, K42, section 8).

Data only: every row names the rule it comes from. Card text is an effect code that
`effects.py` (Vendetta cards) or the flow (Wiseguy powers, by code) interprets, so
replacing a placeholder deck is a data change.
"""

from __future__ import annotations

from dataclasses import dataclass

# -- Turfs (NC-K01..K05) ------------------------------------------------------------------
RACKET_COLOURS = ("queens", "brooklyn", "bronx", "staten_island")  # NC-K03
TRAFFIC_ICONS = ("gambling", "drugs", "prostitution")  # NC-K02
ATLANTIC_CITY = "AC"  # NC-K45: a Vendetta card that lies in the Territory as a Turf


@dataclass(frozen=True, slots=True)
class Turf:
    id: str
    name: str
    colours: tuple[str, ...]
    icons: tuple[str, ...]
    respect: int
    rule: str = "NC-K05"


TURFS: tuple[Turf, ...] = (
    Turf("T01", "Queens Casino", ("queens",), ("gambling",), 0),
    Turf("T02", "Queens Drugs", ("queens",), ("drugs",), 0),
    Turf("T03", "Queens Vice", ("queens",), ("prostitution",), 0),
    Turf("T04", "Brooklyn Casino", ("brooklyn",), ("gambling",), 0),
    Turf("T05", "Brooklyn Drugs", ("brooklyn",), ("drugs",), 0),
    Turf("T06", "Brooklyn Vice", ("brooklyn",), ("prostitution",), 0),
    Turf("T07", "Bronx Casino", ("bronx",), ("gambling",), 0),
    Turf("T08", "Bronx Drugs", ("bronx",), ("drugs",), 0),
    Turf("T09", "Bronx Vice", ("bronx",), ("prostitution",), 0),
    Turf("T10", "Staten Island Casino", ("staten_island",), ("gambling",), 0),
    Turf("T11", "Staten Island Drugs", ("staten_island",), ("drugs",), 0),
    Turf("T12", "Staten Island Vice", ("staten_island",), ("prostitution",), 0),
    Turf("T13", "Connecticut", ("bronx", "queens"), (), 1, "NC-K04"),
    Turf("T14", "New Jersey", ("staten_island", "brooklyn"), (), 1, "NC-K04"),
)
# NC-B05: Atlantic City counts for every Traffic icon, never for a Racket.
ATLANTIC = Turf(ATLANTIC_CITY, "Atlantic City", (), TRAFFIC_ICONS, 0, "NC-K45")
TURF_BY_ID = {t.id: t for t in (*TURFS, ATLANTIC)}


# -- Wiseguys (section 8, NC-W01..W04, NC-W101..W120) ---------------------------------
@dataclass(frozen=True, slots=True)
class Wiseguy:
    id: str
    family: str
    trigger: str  # "busy" (on Busy) or "always" (always on)
    action: str  # the action an on-Busy power names: cash_in, auction, corruption, or ""
    effect: str  # effect code
    param: str  # effect parameter (a Traffic icon or "racket" for bonus draws)
    rule: str


WISEGUYS: tuple[Wiseguy, ...] = (
    Wiseguy("W01", "Earners", "busy", "cash_in", "bonus_note", "gambling", "NC-W101"),
    Wiseguy("W02", "Earners", "busy", "cash_in", "bonus_note", "drugs", "NC-W102"),
    Wiseguy("W03", "Earners", "busy", "cash_in", "bonus_note", "prostitution", "NC-W103"),
    Wiseguy("W04", "Earners", "busy", "cash_in", "bonus_note", "racket", "NC-W104"),
    Wiseguy("W05", "Earners", "busy", "cash_in", "any_source", "", "NC-W105"),
    Wiseguy("W06", "Baldini", "busy", "auction", "wins_ties", "", "NC-W106"),
    Wiseguy("W07", "Baldini", "busy", "auction", "bid_bonus", "5000", "NC-W107"),
    Wiseguy("W08", "Baldini", "busy", "auction", "keep_two", "2", "NC-W108"),
    Wiseguy("W09", "Baldini", "always", "", "meets_last", "", "NC-W109"),
    Wiseguy("W10", "Baldini", "always", "", "meeting_immune", "", "NC-W110"),
    Wiseguy("W11", "Fixers", "busy", "corruption", "two_notes", "2", "NC-W111"),
    Wiseguy("W12", "Fixers", "busy", "corruption", "deck_corruption", "", "NC-W112"),
    Wiseguy("W13", "Fixers", "busy", "corruption", "token_move", "1", "NC-W113"),
    Wiseguy("W14", "Fixers", "busy", "corruption", "peek_pile", "2", "NC-W114"),
    Wiseguy("W15", "Fixers", "busy", "corruption", "draw_after", "", "NC-W115"),
    Wiseguy("W16", "Muscle", "always", "", "hit_immune", "", "NC-W116"),
    Wiseguy("W17", "Muscle", "always", "", "burglary_immune", "", "NC-W117"),
    Wiseguy("W18", "Muscle", "busy", "cash_in", "soften_cheat", "1", "NC-W118"),
    Wiseguy("W19", "Muscle", "always", "", "extra_vendetta", "1", "NC-W119"),
    Wiseguy("W20", "Muscle", "always", "", "respect", "1", "NC-W120"),
)
WISEGUY_BY_ID = {w.id: w for w in WISEGUYS}
# effect code -> the Wiseguy carrying it (one card per code, except bonus_note)
POWER_HOLDER = {w.effect: w.id for w in WISEGUYS if w.effect != "bonus_note"}


# -- Street deck: Respect and Investigations (NC-K11, NC-K14) ---------------------------
RESPECT_CARDS: dict[str, int] = {"R1": 1, "R2": 1, "R3": 1, "R4": 2, "R5": 2, "R6": 3}  # NC-K11


@dataclass(frozen=True, slots=True)
class Investigation:
    id: str
    name: str
    backhander: int
    effect: str  # block_traffic / block_racket / min_bid_notes / one_corruption
    param: str
    guilt: int
    rule: str = "NC-K14"


INVESTIGATIONS: tuple[Investigation, ...] = (
    Investigation("I1", "Narcotics Squad", 30000, "block_traffic", "drugs", 1),
    Investigation("I2", "Vice Squad", 30000, "block_traffic", "prostitution", 1),
    Investigation("I3", "Gaming Commission", 30000, "block_traffic", "gambling", 1),
    Investigation("I4", "RICO Task Force", 40000, "block_racket", "", 1),
    Investigation("I5", "IRS Audit", 20000, "min_bid_notes", "2", 1),
    Investigation("I6", "Grand Jury", 50000, "one_corruption", "1", 1),
)
INVESTIGATION_BY_ID = {i.id: i for i in INVESTIGATIONS}

# -- Titles, Zealous Corruptor, End of Game Bonus (NC-K20..K22) -------------------------
UNDERBOSS = "UB"
CONSIGLIERE = "CG"
PRIMO_CAPO = "PC"
TITLE_RESPECT = {UNDERBOSS: 3, CONSIGLIERE: 2, PRIMO_CAPO: 1}  # NC-K20
TITLE_RANK = {UNDERBOSS: 3, CONSIGLIERE: 2, PRIMO_CAPO: 1}  # NC-V15 (1)
ZEALOUS_CARDS = ("ZC1", "ZC2", "ZC3")  # NC-K21
ZEALOUS_RESPECT = 1
BONUS_CARDS: dict[str, str] = {"B1": "most_vendetta_drawn", "B2": "most_wiseguys", "B3": "most_turfs"}  # NC-K22
BONUS_RESPECT = 2


# -- Notes (NC-K32, NC-K33) -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Note:
    id: int
    value: int
    mark: str  # "" unmarked, "I" Innocent, "G" Guilty


def _note_set() -> tuple[Note, ...]:
    rows = ((5000, "", 30), (10000, "I", 15), (10000, "G", 15), (20000, "I", 8), (20000, "G", 8),
            (50000, "I", 2), (50000, "G", 2))  # NC-K32
    notes: list[Note] = []
    for value, mark, qty in rows:
        for _ in range(qty):
            notes.append(Note(len(notes), value, mark))
    return tuple(notes)


NOTES: tuple[Note, ...] = _note_set()
POLICE_RAID = 80  # NC-K33
NOTE_VALUE: tuple[int, ...] = tuple(n.value for n in NOTES)
NOTE_MARK: tuple[str, ...] = tuple(n.mark for n in NOTES)
VALUE_WEIGHTS = {10000: 1, 20000: 2, 50000: 5}  # NC-V05 value_weighted, NC-K90 verdict.value_weights
# NC-S05: two $5,000, one $10,000 Innocent, one $10,000 Guilty per seat.
START_BANK = (("", 5000), ("", 5000), ("I", 10000), ("G", 10000))


# -- Vendetta deck (NC-K42) ---------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class VendettaCard:
    id: str
    name: str
    kind: str  # snitch, atlantic, revenge, rage
    effect: str  # effect code (effects.py)
    rule: str


def _vendetta_deck() -> tuple[VendettaCard, ...]:
    rows = ((2, "FBI Snitch", "snitch", "snitch", "NC-K46"),
            (1, "Atlantic City", "atlantic", "atlantic_city", "NC-K45"),
            (3, "Hit", "revenge", "hit", "NC-K50"),
            (3, "Burglary", "revenge", "burglary", "NC-K51"),
            (3, "Tip-off", "revenge", "tip_off", "NC-K52"),
            (4, "Beating", "rage", "beating", "NC-K53"),
            (4, "Smash the Joint", "rage", "smash", "NC-K54"))
    cards: list[VendettaCard] = []
    for qty, name, kind, effect, rule in rows:
        for _ in range(qty):
            cards.append(VendettaCard(f"V{len(cards) + 1:02d}", name, kind, effect, rule))
    return tuple(cards)


VENDETTA: tuple[VendettaCard, ...] = _vendetta_deck()
VENDETTA_BY_ID = {v.id: v for v in VENDETTA}
ATLANTIC_CARD = next(v.id for v in VENDETTA if v.kind == "atlantic")

# -- Street deck (NC-S06, NC-K10) --------------------------------------------------------
STREET_SPACES = 4
LOCATIONS = (1, 2, 3, 4)  # NC-K60
MONTHS = 6  # NC-R01
DEAL_WISEGUYS = 3  # NC-S04
DEAL_TURFS = 1
SEAT_COLOURS = ("red", "blue", "green", "yellow", "black")  # NC-S02
MONTH_NAMES = ("January", "February", "March", "April", "May", "June")


def card_kind(card: str) -> str:
    """wiseguy, turf, respect, investigation, title (by id prefix)."""
    if card == UNDERBOSS:
        return "title"
    return {"W": "wiseguy", "T": "turf", "R": "respect", "I": "investigation", "A": "turf"}[card[0]]
