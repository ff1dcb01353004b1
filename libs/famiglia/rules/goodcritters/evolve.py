"""evolve(state, event): one small function per event kind, never random, never a clock.

Every chance outcome is in the events themselves, so folding a match's events rebuilds it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

from famiglia.engine import RuleViolation

from . import config as cfg
from .data import MAX_PLAYERS, NOBODY
from .events import Event
from .state import (
    COMMITTING,
    NONE_COMMITTED,
    RELEASING,
    Known,
    Offer,
    State,
    Step,
    Vote,
    fresh_round_fields,
    put,
    replace,
)
from .view import OPEN, offer_loot_seen


class FoldedRun:
    """The events one `decide` (or `setup`) emitted and the states it folded them into:
    `states[0]` is the state it started from, `states[i + 1]` is `states[i]` evolved by
    `events[i]`. `decide` folds every event as it emits it, and the command path folds the very
    same event objects onto the very same state right after, so `evolve` walks along the last
    run (by identity, in order) instead of evolving each event twice. Anything else is evolved
    afresh, so no result depends on this. Events are facts: never change one after `decide`."""

    __slots__ = ("events", "states", "cursor")

    def __init__(self, events: list[Event], states: list[State | None]) -> None:
        self.events = events
        self.states = states
        self.cursor = 0


_new = object.__new__
_set_dict = State.__dict__["__dict__"].__set__
"""Sets a new State's instance dict: the class's own `__dict__` descriptor, called directly
(`object.__setattr__(new, "__dict__", ...)` looks the descriptor up first, ~450 instructions more)."""

_LAST_RUN = FoldedRun([], [None])
LAST: list[tuple[object, object, State | None]] = [(None, None, None), (None, None, None)]
"""The last one- or two-event decision, as (state before, event, state after) per event: most
commands are one. A list, so the quick deciders set it by index (a module attribute set is not
specialised by CPython and costs several times more)."""


def remember(run: FoldedRun) -> None:
    global _LAST_RUN
    run.cursor = 0
    _LAST_RUN = run


def remember_one(before: State, event: Event, after: State) -> None:
    """The memo of a one-event decision, without a run: the fold that follows asks for it."""
    LAST[0] = (before, event, after)


def remember_two(before: State, first: Event, middle: State, second: Event, after: State) -> None:
    LAST[0] = (before, first, middle)
    LAST[1] = (middle, second, after)


def evolve(state: State | None, event: Event) -> State:
    one = LAST[0]
    if one[1] is event and one[0] is state:
        return one[2]  # type: ignore[return-value]
    one = LAST[1]
    if one[1] is event and one[0] is state:
        return one[2]  # type: ignore[return-value]
    run = _LAST_RUN
    i = run.cursor
    events = run.events
    if i < len(events) and events[i] is event and run.states[i] is state:
        run.cursor = i + 1
        return run.states[i + 1]  # type: ignore[return-value]
    if events and events[0] is event and run.states[0] is state:  # the same run folded again
        run.cursor = 1
        return run.states[1]  # type: ignore[return-value]
    return apply(state, event)


def apply(state: State | None, event: Event) -> State:
    """One event, evolved afresh (no look-up in the last run)."""
    kind = cast(str, event.WhichOneof("kind"))
    if state is None:
        if kind != "game_set_up":
            raise RuleViolation("GC-S01", f"a match starts with game_set_up, not {kind}")
        return _game_set_up(event.game_set_up)
    return _EVOLVERS[kind](state, getattr(event, kind))


def _game_set_up(e: Any) -> State:
    options = tuple((o.key, o.value) for o in e.options)
    seats = e.seats
    config = cfg.parse_items(options, seats)
    return State(
        config=config,
        options=options,
        seats=seats,
        boss=e.first_boss,
        stashes=((),) * seats,
        payoff_cards=(config.payoff_cards_per_player if config.payoff else 0,) * seats,
        **fresh_round_fields(seats),  # type: ignore[arg-type]
    )


def _stash_dealt(s: State, e: Any) -> State:
    return replace(s, stashes=put(s.stashes, e.seat, tuple(e.cards)))


def _pile_stacked(s: State, e: Any) -> State:
    pile = tuple(e.cards)
    return replace(s, pile=pile, pile_start=len(pile))


_FRESH: dict[int, dict[str, object]] = {n: fresh_round_fields(n) for n in range(MAX_PLAYERS + 1)}
"""`fresh_round_fields` per seat count, made once (its tuples are immutable, so States share them)."""


def round_started(s: State, round_: int, boss: int, step: Step) -> State:
    values = s.__dict__.copy()  # `replace`, written out: these run every round
    values.update(_FRESH[s.seats])
    values["round"] = round_
    values["boss"] = boss
    values["step"] = step
    new = _new(State)
    _set_dict(new, values)
    return new


def _round_started(s: State, e: Any) -> State:
    return round_started(s, e.round, e.boss, Step(e.step))


def step_started(s: State, step: Step, turn: int) -> State:
    values = s.__dict__.copy()
    values["step"] = step
    values["turn"] = turn
    new = _new(State)
    _set_dict(new, values)
    return new


def _step_started(s: State, e: Any) -> State:
    return step_started(s, Step(e.step), e.turn)


def loot_revealed(s: State, card: str) -> State:
    values = s.__dict__.copy()
    values["pile"] = s.pile[1:]
    values["table"] = s.table + (card,)
    new = _new(State)
    _set_dict(new, values)  # `made`, inline: these run for most events
    return new


def _loot_revealed(s: State, e: Any) -> State:
    return loot_revealed(s, e.card)


def _fuzz_revealed(s: State, e: Any) -> State:
    # The Fuzz! is on top whenever it turns up (GC-R04, GC-V06, GC-A13).
    return replace(s, pile=s.pile[1:], fuzz_out=True, fuzz_cause=e.cause, fuzz_skimmed=e.cause == 3)


def loot_assigned(s: State, assignment: tuple[int, ...]) -> State:
    """`assignment`: the seat of each table card, in table order."""
    return replace(s, assignment=assignment)


def _loot_assigned(s: State, e: Any) -> State:
    seat_of = {a.card: a.seat for a in e.assignments}
    return loot_assigned(s, tuple(seat_of[c] for c in s.table))


def _release_commitments(s: State) -> tuple[bool, ...]:
    # GC-D04: every public change in Step 3 takes back every commitment.
    return _NONE_COMMITTED[s.seats]


_NONE_COMMITTED = NONE_COMMITTED


# The hot events have their state change as a function of plain values as well, which
# `decide` calls with the values it put into the event (Emitter.emit_folded): the same code, without
# reading the event back.


def threat_placed(s: State, seat: int, target: int) -> State:
    values = s.__dict__.copy()  # `replace`, written out: these run for most commands
    threats = list(s.threats)
    threats[seat] = target
    values["threats"] = tuple(threats)
    changes = list(s.changes)
    changes[seat] += 1
    values["changes"] = tuple(changes)
    values["committed"] = _NONE_COMMITTED[s.seats]
    new = _new(State)
    _set_dict(new, values)
    return new


def threat_withdrawn(s: State, seat: int) -> State:
    """A withdrawn threat points at nobody; it counts as a change like a placed one."""
    return threat_placed(s, seat, NOBODY)


def action_card_chosen(s: State, seat: int, card: int, choices: int) -> State:
    values = s.__dict__.copy()
    cards = list(s.cards)
    cards[seat] = card
    values["cards"] = tuple(cards)
    counts = list(s.choices)
    counts[seat] = choices
    values["choices"] = tuple(counts)
    if s.committed[seat]:  # a change of mind takes the commitment back (an uncommitted choice keeps it)
        values["committed"] = RELEASING[s.committed][seat]
    new = _new(State)
    _set_dict(new, values)
    return new


def committed(s: State, seat: int) -> State:
    values = s.__dict__.copy()
    values["committed"] = COMMITTING[s.committed][seat]
    new = _new(State)
    _set_dict(new, values)
    return new


def _threat_placed(s: State, e: Any) -> State:
    return threat_placed(s, e.seat, e.target)


def _threat_withdrawn(s: State, e: Any) -> State:
    return threat_withdrawn(s, e.seat)


def _action_card_chosen(s: State, e: Any) -> State:
    return action_card_chosen(s, e.seat, e.card, e.choices)


def _committed(s: State, e: Any) -> State:
    return committed(s, e.seat)


def _turn_ended(s: State, e: Any) -> State:
    return replace(s, turn=s.left_of(e.seat))


def actions_locked(s: State) -> State:
    return step_started(s, Step.RESOLVE, NOBODY)


def _actions_locked(s: State, e: Any) -> State:
    return actions_locked(s)


def action_revealed(s: State, seat: int, card: int) -> State:
    values = s.__dict__.copy()
    revealed = list(s.revealed)
    revealed[seat] = card
    values["revealed"] = tuple(revealed)
    values["skims"] = s.skims + (card == 3)
    new = _new(State)
    _set_dict(new, values)
    return new


def _action_revealed(s: State, e: Any) -> State:
    return action_revealed(s, e.seat, e.card)


def loot_skimmed(s: State, seat: int, card: str) -> State:
    values = s.__dict__.copy()
    values["pile"] = s.pile[1:]
    stashes = list(s.stashes)
    stashes[seat] += (card,)
    values["stashes"] = tuple(stashes)
    new = _new(State)
    _set_dict(new, values)
    return new


def _loot_skimmed(s: State, e: Any) -> State:
    return loot_skimmed(s, e.seat, e.card)


def _skim_came_up_empty(s: State, e: Any) -> State:
    return s


def loot_stolen(s: State, thief: int, victim: int, card: str) -> State:
    """GC-H10: the victim now knows the thief holds the card; who knew of the victim's Stash and
    did not see the face (everyone but the thief) no longer knows which of those cards is left."""
    if not card:
        return s
    known = s.known
    if known:
        known = tuple(k for k in known if k[1] != victim or (k[0] == thief and k[2] != card))
    stashes = list(s.stashes)
    robbed = list(stashes[victim])
    while card in robbed:  # every copy of the id, as a filter would (ids are unique)
        robbed.remove(card)
    stashes[victim] = tuple(robbed)
    stashes[thief] += (card,)
    values = s.__dict__.copy()
    values["stashes"] = tuple(stashes)
    values["known"] = known + ((victim, thief, card),)
    new = _new(State)
    _set_dict(new, values)
    return new


def _loot_stolen(s: State, e: Any) -> State:
    return loot_stolen(s, e.thief, e.victim, e.card)


def vote_counted(s: State, yes: int, no: int, outcome: int) -> State:
    """GC-V01, GC-H05: the vote and its round's revealed cards and locked threats, kept for the
    Views after the clean-up (GC-R07) clears them."""
    return replace(s, last_vote=Vote(s.round, s.boss, s.revealed, s.threats, yes, no, outcome))


def _vote_counted(s: State, e: Any) -> State:
    return vote_counted(s, e.yes, e.no, e.outcome)


def loot_handed_out(s: State, pairs: Iterable[tuple[str, int]]) -> State:
    """`pairs`: (card, seat) in the event's order (for the engine's own event, the table's)."""
    stashes = list(s.stashes)
    for card, seat in pairs:
        stashes[seat] += (card,)
    values = s.__dict__.copy()
    values["stashes"] = tuple(stashes)
    values["table"] = ()
    values["assignment"] = ()
    new = _new(State)
    _set_dict(new, values)
    return new


def _loot_handed_out(s: State, e: Any) -> State:
    return loot_handed_out(s, [(a.card, a.seat) for a in e.assignments])


def loot_returned(s: State) -> State:
    values = s.__dict__.copy()
    values["assignment"] = ()
    new = _new(State)
    _set_dict(new, values)
    return new


def _loot_returned(s: State, e: Any) -> State:
    return loot_returned(s)


def boss_changed(s: State, boss: int) -> State:
    values = s.__dict__.copy()
    values["boss"] = boss
    new = _new(State)
    _set_dict(new, values)
    return new


def _boss_changed(s: State, e: Any) -> State:
    return boss_changed(s, e.boss)


def round_ended(s: State) -> State:
    values = s.__dict__.copy()
    values.update(_FRESH[s.seats])
    new = _new(State)
    _set_dict(new, values)
    return new


def _round_ended(s: State, e: Any) -> State:
    return round_ended(s)


def _loot_confiscated(s: State, e: Any) -> State:
    gone = set(e.cards)
    return replace(
        s,
        table=tuple(c for c in s.table if c not in gone),
        assignment=(),
        confiscated=s.confiscated + tuple(e.cards),
    )


def _game_ended(s: State, e: Any) -> State:
    return replace(s, step=Step.OVER, end_reason=e.reason, turn=NOBODY)


def _stashes_revealed(s: State, e: Any) -> State:
    return s


def _move_items(s: State, giver: int, receiver: int, loot: tuple[str, ...], payoff: int) -> State:
    stashes = s.stashes
    if loot:
        gone = set(loot)
        stashes = put(stashes, giver, tuple(c for c in stashes[giver] if c not in gone))
        stashes = put(stashes, receiver, stashes[receiver] + loot)
    cards = s.payoff_cards
    if payoff:
        cards = put(cards, giver, cards[giver] - payoff)
        cards = put(cards, receiver, cards[receiver] + payoff)
    return replace(s, stashes=stashes, payoff_cards=cards)


def _gift_given(s: State, e: Any) -> State:
    loot = tuple(e.loot)
    giver, receiver, open_ = e.giver, e.receiver, e.open
    known = s.known
    if loot:
        # GC-P06: an open gift's faces are public (GC-H04), a private one's the two seats' only
        known = _left(known, giver, loot, lambda seat: open_ or seat == receiver)
        if not open_:
            known += tuple((giver, receiver, card) for card in loot)
    s = _move_items(s, giver, receiver, loot, e.payoff_cards)
    changes = put(s.changes, giver, s.changes[giver] + 1)
    return replace(s, changes=changes, committed=_release_commitments(s), known=known)


def _offer_made(s: State, e: Any) -> State:
    # GC-P09: the items leave the briber at once and lie with the token.
    loot = tuple(e.loot)
    gone = set(loot)
    stashes = put(s.stashes, e.briber, tuple(c for c in s.stashes[e.briber] if c not in gone))
    cards = put(s.payoff_cards, e.briber, s.payoff_cards[e.briber] - e.payoff_cards)
    offer = Offer(e.briber, e.target, e.side, loot, e.payoff_cards, e.visibility)
    briber, target, visibility = e.briber, e.target, e.visibility
    known = s.known
    if loot:  # GC-P10: a seat that sees the offer's faces sees them lie there (View.offers)
        known = _left(known, briber, loot, lambda seat: offer_loot_seen(visibility, briber, target, seat))
    return replace(
        s,
        known=known,
        stashes=stashes,
        payoff_cards=cards,
        offers=s.offers + (offer,),
        changes=put(s.changes, e.briber, s.changes[e.briber] + 1),
        committed=_release_commitments(s),
    )


def _hand_over(s: State, offer: Offer, receiver: int) -> State:
    stashes = put(s.stashes, receiver, s.stashes[receiver] + offer.loot)
    cards = put(s.payoff_cards, receiver, s.payoff_cards[receiver] + offer.payoff_cards)
    return replace(
        s,
        stashes=stashes,
        payoff_cards=cards,
        offers=tuple(o for o in s.offers if (o.briber, o.target) != (offer.briber, offer.target)),
    )


def _offer_withdrawn(s: State, e: Any) -> State:
    offer = s.offer(e.briber, e.target)
    assert offer is not None
    s = _hand_over(s, offer, e.briber)
    return replace(
        s,
        changes=put(s.changes, e.briber, s.changes[e.briber] + 1),
        committed=_release_commitments(s),
        known=s.known + _learnt(offer, e.briber),
    )


def _offer_resolved(s: State, e: Any) -> State:
    offer = s.offer(e.briber, e.target)
    assert offer is not None
    s = _hand_over(s, offer, e.receiver)
    learnt = _learnt(offer, e.receiver)
    return replace(s, known=s.known + learnt) if learnt else s


# -- what a seat knows of another's Stash (State.known, View SeatView.known_loot) -------------


def _left(
    known: tuple[Known, ...], holder: int, moved: tuple[str, ...], sees: Callable[[int], bool]
) -> tuple[Known, ...]:
    """Cards left the holder's Stash: a knower that saw their faces forgets only those cards;
    any other knower forgets all it knew of that Stash, since any of its cards may have gone."""
    if not known:
        return known
    return tuple(k for k in known if k[1] != holder or (k[2] not in moved and sees(k[0])))


def _learnt(offer: Offer, receiver: int) -> tuple[Known, ...]:
    """GC-P10, GC-P11, GC-P15: the offer's Loot goes to the receiver; a seat of the two that saw
    its faces (peek: both, hidden: the briber) and is not the receiver now knows where it is.
    Open Loot is public (GC-H04)."""
    if not offer.loot or offer.visibility == OPEN:
        return ()
    knower = offer.target if receiver == offer.briber else offer.briber
    if not offer_loot_seen(offer.visibility, offer.briber, offer.target, knower):
        return ()
    return tuple((knower, receiver, card) for card in offer.loot)


_EVOLVERS: dict[str, Callable[[State, Any], State]] = {
    "stash_dealt": _stash_dealt,
    "pile_stacked": _pile_stacked,
    "round_started": _round_started,
    "step_started": _step_started,
    "loot_revealed": _loot_revealed,
    "fuzz_revealed": _fuzz_revealed,
    "loot_assigned": _loot_assigned,
    "threat_placed": _threat_placed,
    "threat_withdrawn": _threat_withdrawn,
    "action_card_chosen": _action_card_chosen,
    "committed": _committed,
    "turn_ended": _turn_ended,
    "actions_locked": _actions_locked,
    "action_revealed": _action_revealed,
    "loot_skimmed": _loot_skimmed,
    "skim_came_up_empty": _skim_came_up_empty,
    "loot_stolen": _loot_stolen,
    "vote_counted": _vote_counted,
    "loot_handed_out": _loot_handed_out,
    "loot_returned": _loot_returned,
    "boss_changed": _boss_changed,
    "round_ended": _round_ended,
    "loot_confiscated": _loot_confiscated,
    "game_ended": _game_ended,
    "stashes_revealed": _stashes_revealed,
    "gift_given": _gift_given,
    "offer_made": _offer_made,
    "offer_withdrawn": _offer_withdrawn,
    "offer_resolved": _offer_resolved,
}
