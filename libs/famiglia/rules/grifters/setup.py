"""setup(config, seed): the opening events (GR-S01..GR-S13)."""

from __future__ import annotations

from famiglia.engine import MatchConfig, Rng
from famiglia.grifters.v1 import grifters_pb2 as pb

from . import config as config_mod
from . import events as ev
from .data import COLOURS, JOBS, SPECIALISTS
from .decide import drive
from .evolve import FoldedRun, apply_first, remember
from .resolve import Ctx, GameOver


def setup(match: MatchConfig, seed: int) -> list[pb.Event]:
    # GR-S01, GR-F01 (cached by the options: parse checks every key)
    cfg = config_mod.parse_items(match.seats, tuple(sorted((k, str(v)) for k, v in match.options.items())))
    options = config_mod.normalize(match.options)
    rng = Rng(seed)
    n = match.seats
    first = cfg.first_player_seat if cfg.first_player_seat is not None else rng.randrange(n)  # GR-S12
    coffers = cfg.starting_coffers  # GR-S04
    stacks = [  # GR-S05, GR-S06
        pb.JobStack(colour=colour, jobs=[j.id for j in sorted(JOBS, key=lambda j: j.order)
                                         if j.colour == colour])
        for colour in COLOURS
        if next(j.mark for j in JOBS if j.colour == colour) <= cfg.marks_in_play
    ]
    started = pb.Event(match_started=pb.MatchStarted(
        seats=n, options=options, first_player=first, coffers=coffers - cfg.start_isk * n,
        start_isk=cfg.start_isk, out_of_play=cfg.isk_tokens - coffers, stacks=stacks,
    ))
    ctx = Ctx(apply_first(started), rng)
    ctx.emit(ev.deck_shuffled(rng.shuffled([c.id for c in SPECIALISTS])))  # GR-S09
    for _ in range(cfg.start_specialists):  # GR-S10
        for seat in range(n):
            ctx.emit(ev.card_drawn(seat, ctx.state.deck[0], dealt=True))
    ctx.begin_turn(first, 1, 1)
    try:
        drive(ctx)
    except GameOver:  # GR-E08: hands dealt empty (options GR-F01 accepts) play every round without a choice
        pass
    events = [started, *ctx.events]
    remember(FoldedRun(events, [None, *ctx.states]))  # the fold that follows walks these states
    return events
