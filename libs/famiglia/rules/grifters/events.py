"""Small constructors over the generated Event message: one per event kind.

Each sets the fields of the event's sub-message in place: building the sub-message first and
passing it to `Event(...)` copies it, which costs about three times as much on the hot path.

The events that recur (a turn, a caper, a draw, a theft...) are cached by their arguments: `decide`
hands out shared, prebuilt events, as the engine contract allows (events are facts, never changed
after `decide` returned them). Treat every event as read-only.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache, lru_cache

from famiglia.grifters.v1 import grifters_pb2 as pb

Event = pb.Event


@cache
def card_drawn(seat: int, card: str, dealt: bool = False) -> Event:
    e = Event()
    body = e.card_drawn
    body.seat = seat
    body.card = card
    body.dealt = dealt
    return e


def deck_shuffled(cards: Iterable[str]) -> Event:
    e = Event()
    e.deck_shuffled.cards.extend(cards)
    return e


@cache
def turn_began(seat: int, round_: int, turn: int, advance_skipped: bool) -> Event:
    e = Event()
    body = e.turn_began
    body.seat = seat
    body.round = round_
    body.turn = turn
    body.advance_skipped = advance_skipped
    return e


@cache
def time_advanced(seat: int, skipped: bool = False) -> Event:
    e = Event()
    body = e.time_advanced
    body.seat = seat
    body.skipped = skipped
    return e


@cache
def isk_token_placed(seat: int, placed: bool) -> Event:
    e = Event()
    body = e.isk_token_placed
    body.seat = seat
    body.placed = placed
    return e


@cache
def caper_pulled(seat: int, card: str, second: bool = False, use_defaults: bool = False) -> Event:
    e = Event()
    body = e.caper_pulled
    body.seat = seat
    body.card = card
    body.second = second
    body.use_defaults = use_defaults
    return e


def job_completed(seat: int, job: str, team: Iterable[str]) -> Event:
    e = Event()
    body = e.job_completed
    body.seat = seat
    body.job = job
    body.team.extend(team)
    return e


@cache
def isk_stolen(seat: int, victim: int | None, amount: int) -> Event:
    e = Event()
    body = e.isk_stolen
    body.seat = seat
    body.amount = amount
    if victim is None:
        body.from_coffers = True
        body.victim = -1
    else:
        body.victim = victim
    return e


@cache
def choice_opened(seat: int, choice: str, step: int = 0) -> Event:
    e = Event()
    body = e.choice_opened
    body.seat = seat
    body.choice = choice
    body.step = step
    return e


@cache
def opponent_chosen(seat: int, opponent: int) -> Event:
    e = Event()
    body = e.opponent_chosen
    body.seat = seat
    body.opponent = opponent
    return e


def cards_discarded(seat: int, cards: Iterable[str]) -> Event:
    e = Event()
    body = e.cards_discarded
    body.seat = seat
    body.cards.extend(cards)
    return e


def specialist_abducted(seat: int, opponent: int, night: int, card: str, agent: str) -> Event:
    e = Event()
    body = e.specialist_abducted
    body.seat = seat
    body.opponent = opponent
    body.night = night
    body.card = card
    body.agent = agent
    return e


def specialist_kidnapped(seat: int, opponent: int, night: int, card: str) -> Event:
    e = Event()
    body = e.specialist_kidnapped
    body.seat = seat
    body.opponent = opponent
    body.night = night
    body.card = card
    return e


def specialist_hit(seat: int, opponent: int, night: int, card: str) -> Event:
    e = Event()
    body = e.specialist_hit
    body.seat = seat
    body.opponent = opponent
    body.night = night
    body.card = card
    return e


def jobs_swapped(seat: int, own_job: str, opponent: int, their_job: str) -> Event:
    e = Event()
    body = e.jobs_swapped
    body.seat = seat
    body.own_job = own_job
    body.opponent = opponent
    body.their_job = their_job
    return e


@cache
def job_swap_declined(seat: int) -> Event:
    e = Event()
    e.job_swap_declined.seat = seat
    e.job_swap_declined.SetInParent()
    return e


def night_returned(seat: int, night: int, cards: Iterable[str]) -> Event:
    e = Event()
    body = e.night_returned
    body.seat = seat
    body.night = night
    body.cards.extend(cards)
    return e


def partner_chosen(seat: int, card: str) -> Event:
    e = Event()
    body = e.partner_chosen
    body.seat = seat
    body.card = card
    return e


def caper_copied(seat: int, card: str, copier: str) -> Event:
    e = Event()
    body = e.caper_copied
    body.seat = seat
    body.card = card
    body.copier = copier
    return e


@cache
def second_caper_declined(seat: int) -> Event:
    e = Event()
    e.second_caper_declined.seat = seat
    e.second_caper_declined.SetInParent()
    return e


def cards_placed(seat: int, cards: Iterable[str]) -> Event:
    return _cards_placed(seat, tuple(cards))


@lru_cache(maxsize=1 << 14)
def _cards_placed(seat: int, cards: tuple[str, ...]) -> Event:
    e = Event()
    body = e.cards_placed
    body.seat = seat
    body.cards.extend(cards)
    return e


def caper_completed(seat: int, placed: Iterable[str] = ()) -> Event:
    return _caper_completed(seat, tuple(placed))


@lru_cache(maxsize=1 << 14)
def _caper_completed(seat: int, placed: tuple[str, ...]) -> Event:
    e = Event()
    body = e.caper_completed
    body.seat = seat
    body.SetInParent()
    body.placed.extend(placed)
    return e


def cards_refreshed(seat: int, cards: Iterable[str]) -> Event:
    return _cards_refreshed(seat, tuple(cards))


@lru_cache(maxsize=1 << 14)
def _cards_refreshed(seat: int, cards: tuple[str, ...]) -> Event:
    e = Event()
    body = e.cards_refreshed
    body.seat = seat
    body.SetInParent()
    body.cards.extend(cards)
    return e


@cache
def discard_reshuffled(count: int) -> Event:
    e = Event()
    e.discard_reshuffled.count = count
    e.discard_reshuffled.SetInParent()
    return e


def game_ended(reason: str, hands: Iterable[tuple[int, Iterable[str]]], deck: Iterable[str]) -> Event:
    e = Event()
    body = e.game_ended
    body.reason = reason
    body.SetInParent()
    for seat, cards in hands:
        h = body.hands.add()
        h.seat = seat
        h.cards.extend(cards)
    body.deck.extend(deck)
    return e
