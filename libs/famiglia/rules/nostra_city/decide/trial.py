"""THE TRIAL (NC-T01..T04) with the Fixers' options (NC-W111..W115)."""

from __future__ import annotations

from famiglia.engine import Rng
from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

from ..data import POLICE_RAID, WISEGUY_BY_ID
from ..queries import corruption_cap
from ..state import Phase
from .common import Emitter, draw_notes, police_raid, refuse


def corrupt(em: Emitter, seat: int, cmd: pb.Corrupt, rng: Rng) -> None:
    """NC-T01: a Free Wiseguy goes Busy and one Bank Note goes face down on the pile."""
    s = em.state
    if s.phase is not Phase.TRIAL:
        raise refuse("NC-T01", "Corruption is the Trial action")
    p = s.players[seat]
    if cmd.wiseguy not in p.wiseguys or cmd.wiseguy in p.busy:
        raise refuse("NC-R05", "a Corruption needs a Free Wiseguy of your own")
    cap = corruption_cap(s)
    if cap and p.corruption_actions >= cap:
        raise refuse("NC-K15", "the Grand Jury allows one Corruption action per Trial")
    effect = WISEGUY_BY_ID[cmd.wiseguy].effect
    notes = list(cmd.notes)
    if cmd.move_token:
        if effect != "token_move" or s.w13_spent or notes or cmd.from_deck:
            raise refuse("NC-W113", "only W13, once per game, moves the Verdict token instead")
        em(corrupted=pb.Corrupted(seat=seat, wiseguy=cmd.wiseguy, count=0, mode="token"))
        em(verdict_moved=pb.VerdictMoved(delta=1, position=em.state.verdict + 1, reason="W13"))
        return
    if cmd.from_deck:
        if effect != "deck_corruption" or notes:
            raise refuse("NC-W112", "only W12 corrupts with the top card of the Note deck")
        top = s.note_deck[0]
        em(corrupted=pb.Corrupted(seat=seat, wiseguy=cmd.wiseguy, count=0 if top == POLICE_RAID else 1,
                                  mode="deck"))
        if top == POLICE_RAID:
            police_raid(em, seat, rng)
        else:
            em(notes_corrupted=pb.NotesCorrupted(seat=seat, notes=[top], from_deck=True))
        return
    most = 2 if effect == "two_notes" else 1
    if not 1 <= len(notes) <= most:
        raise refuse("NC-W111" if most > 1 else "NC-T01", f"a Corruption places 1 to {most} Note(s)")
    if len(set(notes)) != len(notes) or any(n not in p.bank for n in notes):
        raise refuse("NC-T01", "corrupt with Notes from your own Bank (NC-X04)")
    em(corrupted=pb.Corrupted(seat=seat, wiseguy=cmd.wiseguy, count=len(notes), mode="bank"))
    em(notes_corrupted=pb.NotesCorrupted(seat=seat, notes=notes))
    if effect == "peek_pile":  # NC-W114
        others = [n for n, placer in em.state.pile if placer != seat]
        if others:
            em(pile_notes_peeked=pb.PileNotesPeeked(seat=seat, notes=sorted(rng.sample(others, min(2, len(others))))))
    elif effect == "draw_after":  # NC-W115
        draw_notes(em, seat, 1, rng, bonus=True)


def zealous_corruptor(em: Emitter) -> None:
    """NC-T02/T03/S12: from April on, the only corruptor of the Trial takes a card."""
    s = em.state
    cfg = s.config
    corruptors = [p for p in range(s.seats) if s.players[p].corruption_actions > 0]
    if len(corruptors) != 1 or s.month < cfg.zealous_from_month or not s.zealous_left:
        return
    if cfg.zealous_needs_titles and len(s.titles) < 3:
        return
    em(zealous_corruptor_taken=pb.ZealousCorruptorTaken(seat=corruptors[0], card=s.zealous_left[0]))
