"""THE MEETING (NC-M01..M20): sealed bids in turn, then the resolution of the Street."""

from __future__ import annotations

from famiglia.engine import Rng
from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

from ..data import INVESTIGATION_BY_ID, NOTE_VALUE, UNDERBOSS, WISEGUY_BY_ID
from ..flow import clockwise_from
from ..queries import has_power, min_bid_notes
from ..state import Bid, Phase, State
from .common import Emitter, cheat_draws, refuse


def place_bid(em: Emitter, seat: int, cmd: pb.PlaceBid, rng: Rng) -> None:
    """NC-M01..M04: a Free Wiseguy, an unused Location card, one or more Bank Notes."""
    s = em.state
    if s.phase is not Phase.MEETING:
        raise refuse("NC-M01", "bids are placed in the Meeting")
    p = s.players[seat]
    if cmd.wiseguy not in p.wiseguys or cmd.wiseguy in p.busy:
        raise refuse("NC-R05", "a bid needs a Free Wiseguy of your own")
    if cmd.location not in p.locations:
        raise refuse("NC-M02", "each Location card is used once per Meeting")
    if not s.street[cmd.location - 1]:
        raise refuse("NC-M03", "bids only name a Street space that holds a card")
    notes = list(cmd.notes)
    if len(set(notes)) != len(notes) or any(n not in p.bank for n in notes):
        raise refuse("NC-M01", "a bid is made of Notes from your own Bank")
    need = min_bid_notes(s)
    if len(notes) < need:
        raise refuse("NC-K15" if need > 1 else "NC-M01", f"a bid needs at least {need} Note(s)")
    em(bid_committed=pb.BidCommitted(seat=seat, wiseguy=cmd.wiseguy, count=len(notes)))
    em(bid_content=pb.BidContent(seat=seat, wiseguy=cmd.wiseguy, location=cmd.location, notes=notes))


def bid_value(bid: Bid) -> int:
    """NC-M04 with NC-W107 (+$5,000)."""
    bonus = int(WISEGUY_BY_ID[bid.wiseguy].param) if WISEGUY_BY_ID[bid.wiseguy].effect == "bid_bonus" else 0
    return sum(NOTE_VALUE[n] for n in bid.notes) + bonus


def _top(bids: list[Bid]) -> int:
    """The strictly highest bid's seat, W06 breaking a tie for the top (NC-W106); -1 on a tie."""
    values = [bid_value(b) for b in bids]
    top = max(values)
    leaders = [b for b, v in zip(bids, values, strict=True) if v == top]
    if len(leaders) == 1:
        return leaders[0].seat
    tie_winners = [b for b in leaders if WISEGUY_BY_ID[b.wiseguy].effect == "wins_ties"]
    return tie_winners[0].seat if len(tie_winners) == 1 else -1


def reveal_locations(em: Emitter) -> None:
    """NC-M05: every Location card lying on a Wiseguy is revealed at once."""
    em(locations_revealed=pb.LocationsRevealed(bids=[
        pb.BidLocation(seat=b.seat, wiseguy=b.wiseguy, location=b.location) for b in em.state.bids]))


def _show(em: Emitter, space: int, bids: list[Bid]) -> None:
    em(bids_revealed=pb.BidsRevealed(space=space, bids=[
        pb.RevealedBid(seat=b.seat, wiseguy=b.wiseguy, notes=b.notes, value=bid_value(b)) for b in bids]))


def resolve_space(em: Emitter, rng: Rng) -> None:
    """NC-M06..M12 for the next Street space, in order #1..#4."""
    s = em.state
    space = s.resolution
    card = s.street[space - 1]
    bids = [b for b in s.bids if b.location == space]
    if not bids or not card:
        em(space_resolved=pb.SpaceResolved(space=space, card=card, outcome="empty", winner=-1))  # NC-M06
        return
    if card in INVESTIGATION_BY_ID:  # NC-M11, NC-M12
        _show(em, space, bids)
        total = sum(bid_value(b) for b in bids)
        if total < INVESTIGATION_BY_ID[card].backhander:
            em(space_resolved=pb.SpaceResolved(space=space, card=card, outcome="investigation_stays", winner=-1))
            return
        winner = _top(bids)
        if winner < 0:
            em(space_resolved=pb.SpaceResolved(space=space, card=card, outcome="investigation_removed",
                                               winner=-1))
            return
        em(space_resolved=pb.SpaceResolved(space=space, card=card, outcome="investigation_taken", winner=winner))
        em(card_won=pb.CardWon(seat=winner, card=card, space=space))
        return
    if len(bids) == 1:  # NC-M07: the card waits for the Note kept (NC-D09)
        em(space_resolved=pb.SpaceResolved(space=space, card=card, outcome="single", winner=bids[0].seat))
        return
    _show(em, space, bids)  # NC-M08
    winner = _top(bids)
    if winner < 0:  # NC-M09
        em(space_resolved=pb.SpaceResolved(space=space, card=card, outcome="tie", winner=-1))
        return
    em(space_resolved=pb.SpaceResolved(space=space, card=card, outcome="won", winner=winner))
    em(card_won=pb.CardWon(seat=winner, card=card, space=space))


def keep_notes(em: Emitter, seat: int, cmd: pb.KeepNotes, rng: Rng) -> None:
    """NC-M07/W108: keep one Note (two with W08) of the single winning bid, discard the rest."""
    choice = em.state.choice
    assert choice is not None and choice.kind == "keep"
    kept = list(cmd.notes)
    if len(set(kept)) != len(kept) or any(n not in choice.notes for n in kept):
        raise refuse("NC-M07", "keep Notes of your own winning bid")
    if not 1 <= len(kept) <= min(choice.keep, len(choice.notes)):
        code = "NC-W108" if choice.keep > 1 else "NC-M07"
        raise refuse(code, f"keep 1 to {min(choice.keep, len(choice.notes))} Note(s)")
    discarded = [n for n in choice.notes if n not in kept]
    em(notes_kept=pb.NotesKept(seat=seat, kept=sorted(kept), discarded=discarded,
                               kept_count=len(kept), discarded_count=len(discarded)))


def default_keep(state: State) -> pb.KeepNotes:
    """NC-D09 timeout: the highest Notes; among equals, the earliest placed."""
    choice = state.choice
    assert choice is not None
    ranked = sorted(range(len(choice.notes)), key=lambda i: (-NOTE_VALUE[choice.notes[i]], i))
    return pb.KeepNotes(notes=[choice.notes[i] for i in ranked[: choice.keep]])


def forced_keep(state: State) -> pb.KeepNotes | None:
    """NC-D03: a one-Note bid (public count) leaves one choice."""
    choice = state.choice
    assert choice is not None
    return pb.KeepNotes(notes=list(choice.notes)) if len(choice.notes) == 1 else None


def title_candidates(state: State) -> list[int]:
    """NC-M18: Consigliere to another player; Primo Capo to neither Consigliere nor Underboss."""
    choice = state.choice
    assert choice is not None
    exclude = {choice.seat, state.holder(UNDERBOSS)}
    return [p for p in clockwise_from((choice.seat + 1) % state.seats, state.seats) if p not in exclude]


def assign_title(em: Emitter, seat: int, cmd: pb.AssignTitle, rng: Rng) -> None:
    """NC-M18, then NC-M19 (Cheated without a Title) once the Primo Capo is given."""
    choice = em.state.choice
    assert choice is not None
    if cmd.title != choice.kind:
        raise refuse("NC-M18", f"the title to give now is {choice.kind}")
    if cmd.seat not in title_candidates(em.state):
        raise refuse("NC-M18", f"seat {cmd.seat} may not receive the {cmd.title}")
    em(title_assigned=pb.TitleAssigned(title=cmd.title, from_seat=seat, to_seat=cmd.seat))
    if cmd.title == "primo_capo":
        s = em.state
        holders = {h for _, h in s.titles}
        cheats = [pb.Cheat(seat=p, shortfall=1, draws=cheat_draws(s, p, 1))
                  for p in clockwise_from(s.first_player, s.seats)
                  if p not in holders and not has_power(s.players[p], "meeting_immune")]  # NC-W110
        if cheats:
            em(players_cheated=pb.PlayersCheated(reason="titles", cause=-1, cheats=cheats))


def default_title(state: State) -> pb.AssignTitle:
    """NC-D10/D11 timeout: the first eligible player clockwise."""
    choice = state.choice
    assert choice is not None
    return pb.AssignTitle(title=choice.kind, seat=title_candidates(state)[0])


def forced_title(state: State) -> pb.AssignTitle | None:
    """NC-D03: the last possible Primo Capo receiver is chosen automatically."""
    return default_title(state) if len(title_candidates(state)) == 1 else None


def meeting_cheats(em: Emitter) -> None:
    """NC-M13/M14/X08: a bidder who won nothing draws one Vendetta, clockwise from the first player."""
    s = em.state
    cheats = [pb.Cheat(seat=p, shortfall=1, draws=cheat_draws(s, p, 1))
              for p in clockwise_from(s.first_player, s.seats)
              if p in s.meeting_bidders and p not in s.meeting_winners
              and not has_power(s.players[p], "meeting_immune")]  # NC-W110
    em(players_cheated=pb.PlayersCheated(reason="meeting", cause=-1, cheats=cheats))
