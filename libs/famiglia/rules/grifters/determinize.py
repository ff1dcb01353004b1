"""determinize(view, seat, rng): a full State consistent with one seat's View, never the true one.

Known to the seat: its own hand and everything public (GR-H01). Sampled: the Specialists in other
hands and the deck order (GR-H02, GR-H05; after a reshuffle the deck holds reshuffled cards only),
and, when another seat is choosing which Mastermind card to keep, which of its hand cards were
drawn (GR-H07).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache
from itertools import filterfalse

from famiglia.engine import Rng
from famiglia.engine.readings import ViewReadings
from famiglia.grifters.v1 import grifters_pb2 as pb

from . import config as config_mod
from .data import IS_RINGLEADER, RINGLEADER_TYPES, SPECIALISTS
from .flow import choice_options
from .state import COPY, KEEP, NONE, Caper, Player, State, evolved, in_hand_order


def determinize(v: pb.View, seat: int, rng: Rng) -> State:
    return _deal(_read(v, seat), rng)


@dataclass(frozen=True, slots=True)
class _Table:
    """What the View fixes for one seat, before any card is dealt: the Specialists it cannot
    see (in id order), each hand known or to be dealt, and every public field as state values."""

    unseen: tuple[str, ...]
    hands: tuple[tuple[str, ...], ...]
    """A known hand, or the own Ringleaders of a hand the seat cannot see."""
    dealt: tuple[int | None, ...]
    """How many unseen cards join each hidden hand (None: a known hand)."""
    players: tuple[dict[str, object], ...]
    """Each Player's fields but its hand."""
    deck: tuple[str, ...] | None
    """The deck once over; None: what is left of the unseen cards."""
    deck_pool: frozenset[str] | None
    """After a reshuffle, the unseen cards the deck may hold (GR-H05: the reshuffled ones); None
    before the first, when any unseen card may lie there."""
    deck_size: int
    caper: Caper | None
    keep_drawn: tuple[str, ...] | None
    """The Mastermind cards drawn while a keep choice is open (sampled when not shown: ())."""
    active: int
    fields: dict[str, object]
    """Every other State field."""



@lru_cache(maxsize=64)
def _config(seats: int, items: tuple[tuple[str, str], ...]) -> tuple[tuple[tuple[str, str], ...], config_mod.Config]:
    """The normalized options (sorted pairs) and their Config, once per options (a frozen
    Config; a refused option raises each time)."""
    options = config_mod.normalize(dict(items))
    return tuple(sorted(options.items())), config_mod.parse(seats, options)


@cache
def _specialist_ids() -> tuple[str, ...]:
    return tuple(sorted(c.id for c in SPECIALISTS))


def _read_view(v: pb.View, seat: int) -> _Table:
    options, cfg = _config(v.seats, tuple(v.options.items()))
    seen: set[str] = set(v.discard)
    for pv in v.players:
        seen.update(pv.refresh)
        seen.update(pv.in_play)
        for night in pv.nights:
            seen.update(night.cards)
        if pv.seat == seat or v.over:
            seen.update(pv.hand)
    unseen = tuple(filterfalse(seen.__contains__, _specialist_ids()))
    hands: list[tuple[str, ...]] = []
    dealt: list[int | None] = []
    players: list[dict[str, object]] = []
    for pv in v.players:
        if pv.seat == seat or v.over:
            hands.append(tuple(pv.hand))
            dealt.append(None)
        else:
            # A player's own Ringleaders are in hand unless they lie in view elsewhere (GR-C10).
            rings = tuple(f"R{pv.seat}-{code}" for code, *_ in RINGLEADER_TYPES
                          if code in cfg.ringleaders and f"R{pv.seat}-{code}" not in seen)
            hands.append(rings)
            dealt.append(pv.hand_size - len(rings))
        players.append(dict(
            nights=tuple(tuple(n.cards) for n in pv.nights),
            tokens=tuple(n.token for n in pv.nights),
            refresh=tuple(pv.refresh),
            in_play=tuple(pv.in_play),
            stash=pv.stash,
            jobs=tuple(pv.jobs),
            had_turn=pv.had_turn,
        ))
    caper = None
    if v.caper_code:
        caper = Caper(v.caper_card, v.caper_code, v.caper_job, v.caper_step)
    choice = v.choice.choice if v.HasField("choice") and v.choice.choice != "play" else NONE
    keep_drawn = tuple(v.choice.drawn) if caper is not None and choice == KEEP else None
    return _Table(
        unseen=unseen, hands=tuple(hands), dealt=tuple(dealt), players=tuple(players),
        deck=tuple(v.deck) if v.over else None,
        deck_pool=frozenset(v.reshuffled).intersection(unseen) if v.reshuffled and not v.over else None,
        deck_size=v.deck_size, caper=caper, keep_drawn=keep_drawn, active=v.active,
        fields=dict(
            config=cfg,
            options=options,
            seats=v.seats,
            first_player=v.first_player,
            coffers=v.coffers,
            out_of_play=v.out_of_play,
            stacks=tuple((s.colour, tuple(s.jobs)) for s in v.stacks),
            discard=tuple(v.discard),
            reshuffled=tuple(v.reshuffled),
            active=v.active,
            round=v.round,
            turn=v.turn,
            phase=v.phase,
            played=_played(v),
            choice=choice,
            use_defaults=v.use_defaults,
            swapped_in=frozenset(v.swapped_in),
            locked=frozenset(v.choice.locked) if v.HasField("choice") else frozenset(),
            over=v.over,
            end_reason=v.end_reason,
        ),
    )


def _deal(table: _Table, rng: Rng) -> State:
    """One world: the unseen Specialists shuffled into the other hands and the deck, with the
    draws (and in the order) the sample has always used.

    Another seat's open Fall Guy choice is asked only when its hand holds a card it may copy
    (GR-D04, GR-K20), which everyone can tell: a world without one is drawn again (rejection
    keeps the worlds that fit equally likely), so the chooser always has a legal answer."""
    state = _deal_once(table, rng)
    if table.fields["choice"] != COPY or table.dealt[table.active] is None:
        return state
    for _ in range(_REDRAWS):
        if choice_options(state, COPY):
            return state
        state = _deal_once(table, rng)
    return state


_REDRAWS = 256
"""Fresh worlds drawn at most for an open copy choice (the true world is one of those that fit,
so one in a few fits: a hand of k cards misses only when all k are Fall Guys)."""


def _deal_once(table: _Table, rng: Rng) -> State:
    unseen = rng.shuffled(table.unseen)
    deck: tuple[str, ...] | None = table.deck
    if table.deck_pool is not None:  # GR-H05: the deck holds reshuffled cards only; the hands get the rest
        pool = table.deck_pool
        deck = tuple([c for c in unseen if c in pool][:table.deck_size])
        dealt = set(deck)
        unseen = [c for c in unseen if c not in dealt]
    players = []
    for hand, k, fields in zip(table.hands, table.dealt, table.players, strict=True):
        if k is not None:
            hand = hand + tuple(unseen[:k])
            del unseen[:k]
        players.append(Player(hand=in_hand_order(hand), **fields))  # type: ignore[arg-type]
    if deck is None:
        deck = tuple(unseen)
    caper = table.caper
    if caper is not None and table.keep_drawn is not None:
        drawn = table.keep_drawn
        if not drawn:  # another seat's Mastermind: any 3 of its hand Specialists (GR-H07)
            specs = [c for c in players[table.active].hand if not IS_RINGLEADER[c]]
            drawn = tuple(rng.sample(specs, min(3, len(specs))))
        caper = evolved(caper, drawn=drawn)
    return State(players=tuple(players), deck=deck, caper=caper, **table.fields)  # type: ignore[arg-type]


def _played(v: pb.View) -> bool:
    """Phase 2's play happened unless the play decision is open (or Phase 2 has not begun)."""
    if v.over:
        return False
    if v.HasField("choice") and v.choice.choice == "play":
        return False
    return v.phase == "play"


_read = ViewReadings(_read_view)  # read once per (View, seat)
