"""determinize(view, seat, rng): a full State consistent with one seat's View, never the true one.

Known to the seat: its own hand and everything public (GR-H01). Sampled: the Specialists in other
hands and the deck order (GR-H02, GR-H05), and, when another seat is choosing which Mastermind card
to keep, which of its hand cards were drawn (GR-H07).
"""

from __future__ import annotations

from famiglia.engine import Rng
from famiglia.grifters.v1 import grifters_pb2 as pb

from . import config as config_mod
from .data import IS_RINGLEADER, RINGLEADER_TYPES, SPECIALISTS
from .state import KEEP, NONE, Caper, Player, State, evolved, in_hand_order


def determinize(v: pb.View, seat: int, rng: Rng) -> State:
    options = config_mod.normalize(dict(v.options))
    cfg = config_mod.parse(v.seats, options)
    seen: set[str] = set(v.discard)
    for pv in v.players:
        seen.update(pv.refresh)
        seen.update(pv.in_play)
        for night in pv.nights:
            seen.update(night.cards)
        if pv.seat == seat or v.over:
            seen.update(pv.hand)
    unseen = rng.shuffled(sorted(c.id for c in SPECIALISTS if c.id not in seen))
    players = []
    for pv in v.players:
        if pv.seat == seat or v.over:
            hand = tuple(pv.hand)
        else:
            # A player's own Ringleaders are in hand unless they lie in view elsewhere (GR-C10).
            rings = [f"R{pv.seat}-{code}" for code, *_ in RINGLEADER_TYPES
                     if code in cfg.ringleaders and f"R{pv.seat}-{code}" not in seen]
            k = pv.hand_size - len(rings)
            hand = tuple(rings) + tuple(unseen[:k])
            del unseen[:k]
        players.append(Player(
            hand=in_hand_order(hand),
            nights=tuple(tuple(n.cards) for n in pv.nights),
            tokens=tuple(n.token for n in pv.nights),
            refresh=tuple(pv.refresh),
            in_play=tuple(pv.in_play),
            stash=pv.stash,
            jobs=tuple(pv.jobs),
            had_turn=pv.had_turn,
        ))
    deck = tuple(v.deck) if v.over else tuple(unseen)
    caper = None
    if v.caper_code:
        caper = Caper(v.caper_card, v.caper_code, v.caper_job, v.caper_step)
    choice = v.choice.choice if v.HasField("choice") and v.choice.choice != "play" else NONE
    if caper is not None and choice == KEEP:
        drawn = tuple(v.choice.drawn)
        if not drawn:  # another seat's Mastermind: any 3 of its hand Specialists (GR-H07)
            specs = [c for c in players[v.active].hand if not IS_RINGLEADER[c]]
            drawn = tuple(rng.sample(specs, min(3, len(specs))))
        caper = evolved(caper, drawn=drawn)
    return State(
        config=cfg,
        options=tuple(sorted(options.items())),
        seats=v.seats,
        first_player=v.first_player,
        players=tuple(players),
        coffers=v.coffers,
        out_of_play=v.out_of_play,
        stacks=tuple((s.colour, tuple(s.jobs)) for s in v.stacks),
        deck=deck,
        discard=tuple(v.discard),
        active=v.active,
        round=v.round,
        turn=v.turn,
        phase=v.phase,
        played=_played(v),
        caper=caper,
        choice=choice,
        use_defaults=v.use_defaults,
        swapped_in=frozenset(v.swapped_in),
        locked=frozenset(v.choice.locked) if v.HasField("choice") else frozenset(),
        over=v.over,
        end_reason=v.end_reason,
    )


def _played(v: pb.View) -> bool:
    """Phase 2's play happened unless the play decision is open (or Phase 2 has not begun)."""
    if v.over:
        return False
    if v.HasField("choice") and v.choice.choice == "play":
        return False
    return v.phase == "play"
