"""Event constructors over the generated messages, one per kind, in the game's words."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from famiglia.goodcritters.v1 import goodcritters_pb2 as pb

Event = pb.Event
_pb: Any = pb
"""The same module, untyped: enum fields take the plain ints the engine keeps (the stubs want
their NewType), and a message's own fields are set in place, which is cheaper than building a
sub-message and copying it into the Event."""


def pairs_of(pairs: Iterable[tuple[str, int]]) -> list[pb.LootAssignment]:
    return [_pb.LootAssignment(card=c, seat=s) for c, s in pairs]


# -- events ---------------------------------------------------------------------------------


def game_set_up(seats: int, options: Sequence[tuple[str, str]], first_boss: int) -> Event:
    opts = [_pb.OptionValue(key=k, value=v) for k, v in options]
    return Event(game_set_up=_pb.GameSetUp(seats=seats, options=opts, first_boss=first_boss))


def stash_dealt(seat: int, cards: Sequence[str]) -> Event:
    return Event(stash_dealt=_pb.StashDealt(seat=seat, cards=cards, count=len(cards)))


def pile_stacked(cards: Sequence[str], fuzz_position: int) -> Event:
    return Event(pile_stacked=_pb.PileStacked(cards=cards, fuzz_position=fuzz_position))


def round_started(round_: int, boss: int, step: int) -> Event:
    return Event(round_started=_pb.RoundStarted(round=round_, boss=boss, step=step))


def step_started(step: int, turn: int = -1) -> Event:
    return Event(step_started=_pb.StepStarted(step=step, turn=turn))


def loot_revealed(card: str) -> Event:
    e = Event()
    e.loot_revealed.card = card
    return e


def fuzz_revealed(cause: int) -> Event:
    return Event(fuzz_revealed=_pb.FuzzRevealed(cause=cause))


def loot_assigned(pairs: Iterable[tuple[str, int]]) -> Event:
    return Event(loot_assigned=_pb.LootAssigned(assignments=pairs_of(pairs)))


def threat_placed(seat: int, target: int) -> Event:
    e = Event()
    body = e.threat_placed
    body.seat = seat
    body.target = target
    return e


def threat_withdrawn(seat: int) -> Event:
    return Event(threat_withdrawn=_pb.ThreatWithdrawn(seat=seat))


def action_card_chosen(seat: int, card: int, choices: int) -> Event:
    e = Event()
    body: Any = e.action_card_chosen
    body.seat = seat
    body.card = card
    body.choices = choices
    return e


def committed(seat: int) -> Event:
    e = Event()
    e.committed.seat = seat
    return e


def turn_ended(seat: int) -> Event:
    return Event(turn_ended=_pb.TurnEnded(seat=seat))


def actions_locked() -> Event:
    return Event(actions_locked=_pb.ActionsLocked())


def action_revealed(seat: int, card: int, out_of_turn: bool = False) -> Event:
    e = Event()
    body: Any = e.action_revealed
    body.seat = seat
    body.card = card
    body.out_of_turn = out_of_turn
    return e


def loot_skimmed(seat: int, card: str) -> Event:
    return Event(loot_skimmed=_pb.LootSkimmed(seat=seat, card=card))


def skim_came_up_empty(seat: int) -> Event:
    return Event(skim_came_up_empty=_pb.SkimCameUpEmpty(seat=seat))


def loot_stolen(thief: int, victim: int, card: str, cause: int) -> Event:
    return Event(
        loot_stolen=_pb.LootStolen(thief=thief, victim=victim, card=card, cause=cause, nothing=not card)
    )


def vote_counted(yes: int, no: int, outcome: int) -> Event:
    return Event(vote_counted=_pb.VoteCounted(yes=yes, no=no, outcome=outcome))


def loot_handed_out(pairs: Iterable[tuple[str, int]]) -> Event:
    return Event(loot_handed_out=_pb.LootHandedOut(assignments=pairs_of(pairs)))


def loot_returned() -> Event:
    return Event(loot_returned=_pb.LootReturned())


def boss_changed(boss: int, reason: int) -> Event:
    return Event(boss_changed=_pb.BossChanged(boss=boss, reason=reason))


def round_ended(round_: int) -> Event:
    return Event(round_ended=_pb.RoundEnded(round=round_))


def loot_confiscated(cards: Sequence[str]) -> Event:
    return Event(loot_confiscated=_pb.LootConfiscated(cards=cards))


def game_ended(reason: int) -> Event:
    return Event(game_ended=_pb.GameEnded(reason=reason))


def stashes_revealed(stashes: Sequence[Sequence[str]], pile: Sequence[str]) -> Event:
    return Event(
        stashes_revealed=_pb.StashesRevealed(
            stashes=[_pb.SeatStash(seat=i, cards=cards) for i, cards in enumerate(stashes)], pile=pile
        )
    )


def gift_given(giver: int, receiver: int, loot: Sequence[str], payoff_cards: int, open_: bool) -> Event:
    return Event(
        gift_given=_pb.GiftGiven(
            giver=giver,
            receiver=receiver,
            loot=loot,
            loot_count=len(loot),
            payoff_cards=payoff_cards,
            open=open_,
        )
    )


def offer_made(
    briber: int, target: int, side: int, loot: Sequence[str], payoff_cards: int, visibility: int
) -> Event:
    return Event(
        offer_made=_pb.OfferMade(
            briber=briber,
            target=target,
            side=side,
            loot=loot,
            loot_count=len(loot),
            payoff_cards=payoff_cards,
            visibility=visibility,
        )
    )


def offer_withdrawn(briber: int, target: int) -> Event:
    return Event(offer_withdrawn=_pb.OfferWithdrawn(briber=briber, target=target))


def offer_resolved(
    briber: int, target: int, receiver: int, loot: Sequence[str], payoff_cards: int, visibility: int
) -> Event:
    return Event(
        offer_resolved=_pb.OfferResolved(
            briber=briber,
            target=target,
            receiver=receiver,
            loot=loot,
            loot_count=len(loot),
            payoff_cards=payoff_cards,
            visibility=visibility,
            paid=receiver == target,
        )
    )
