"""Small constructors over the generated Event message: one per event kind."""

from __future__ import annotations

from collections.abc import Iterable

from famiglia.grifters.v1 import grifters_pb2 as pb

Event = pb.Event


def card_drawn(seat: int, card: str, dealt: bool = False) -> Event:
    return Event(card_drawn=pb.CardDrawn(seat=seat, card=card, dealt=dealt))


def deck_shuffled(cards: Iterable[str]) -> Event:
    return Event(deck_shuffled=pb.DeckShuffled(cards=list(cards)))


def turn_began(seat: int, round_: int, turn: int, advance_skipped: bool) -> Event:
    return Event(turn_began=pb.TurnBegan(seat=seat, round=round_, turn=turn, advance_skipped=advance_skipped))


def time_advanced(seat: int, skipped: bool = False) -> Event:
    return Event(time_advanced=pb.TimeAdvanced(seat=seat, skipped=skipped))


def isk_token_placed(seat: int, placed: bool) -> Event:
    return Event(isk_token_placed=pb.IskTokenPlaced(seat=seat, placed=placed))


def caper_pulled(seat: int, card: str, second: bool = False, use_defaults: bool = False) -> Event:
    return Event(caper_pulled=pb.CaperPulled(seat=seat, card=card, second=second, use_defaults=use_defaults))


def job_completed(seat: int, job: str, team: Iterable[str]) -> Event:
    return Event(job_completed=pb.JobCompleted(seat=seat, job=job, team=list(team)))


def isk_stolen(seat: int, victim: int | None, amount: int) -> Event:
    if victim is None:
        return Event(isk_stolen=pb.IskStolen(seat=seat, from_coffers=True, victim=-1, amount=amount))
    return Event(isk_stolen=pb.IskStolen(seat=seat, victim=victim, amount=amount))


def choice_opened(seat: int, choice: str, step: int = 0) -> Event:
    return Event(choice_opened=pb.ChoiceOpened(seat=seat, choice=choice, step=step))


def opponent_chosen(seat: int, opponent: int) -> Event:
    return Event(opponent_chosen=pb.OpponentChosen(seat=seat, opponent=opponent))


def cards_discarded(seat: int, cards: Iterable[str]) -> Event:
    return Event(cards_discarded=pb.CardsDiscarded(seat=seat, cards=list(cards)))


def specialist_abducted(seat: int, opponent: int, night: int, card: str, agent: str) -> Event:
    return Event(specialist_abducted=pb.SpecialistAbducted(
        seat=seat, opponent=opponent, night=night, card=card, agent=agent))


def specialist_kidnapped(seat: int, opponent: int, night: int, card: str) -> Event:
    return Event(specialist_kidnapped=pb.SpecialistKidnapped(seat=seat, opponent=opponent, night=night, card=card))


def specialist_hit(seat: int, opponent: int, night: int, card: str) -> Event:
    return Event(specialist_hit=pb.SpecialistHit(seat=seat, opponent=opponent, night=night, card=card))


def jobs_swapped(seat: int, own_job: str, opponent: int, their_job: str) -> Event:
    return Event(jobs_swapped=pb.JobsSwapped(seat=seat, own_job=own_job, opponent=opponent, their_job=their_job))


def job_swap_declined(seat: int) -> Event:
    return Event(job_swap_declined=pb.JobSwapDeclined(seat=seat))


def night_returned(seat: int, night: int, cards: Iterable[str]) -> Event:
    return Event(night_returned=pb.NightReturned(seat=seat, night=night, cards=list(cards)))


def partner_chosen(seat: int, card: str) -> Event:
    return Event(partner_chosen=pb.PartnerChosen(seat=seat, card=card))


def caper_copied(seat: int, card: str, copier: str) -> Event:
    return Event(caper_copied=pb.CaperCopied(seat=seat, card=card, copier=copier))


def second_caper_declined(seat: int) -> Event:
    return Event(second_caper_declined=pb.SecondCaperDeclined(seat=seat))


def cards_placed(seat: int, cards: Iterable[str]) -> Event:
    return Event(cards_placed=pb.CardsPlaced(seat=seat, cards=list(cards)))


def caper_completed(seat: int) -> Event:
    return Event(caper_completed=pb.CaperCompleted(seat=seat))


def cards_refreshed(seat: int, cards: Iterable[str]) -> Event:
    return Event(cards_refreshed=pb.CardsRefreshed(seat=seat, cards=list(cards)))


def discard_reshuffled(count: int) -> Event:
    return Event(discard_reshuffled=pb.DiscardReshuffled(count=count))


def game_ended(reason: str, hands: Iterable[tuple[int, Iterable[str]]], deck: Iterable[str]) -> Event:
    return Event(game_ended=pb.GameEnded(
        reason=reason,
        hands=[pb.SeatCards(seat=s, cards=list(c)) for s, c in hands],
        deck=list(deck),
    ))
