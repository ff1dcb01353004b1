"""Card and reroll window answers (NP-D5, NP-D6): simultaneous and hidden until resolution (NP-H9)."""

from __future__ import annotations

from typing import Any

from famiglia.engine import RuleViolation

from ..crew import claim_legal
from ..plays import check_play
from ..tx import Tx


def answer(tx: Tx, seat: int, msg: Any, cmd: Any) -> None:
    w = tx.s.window
    assert w is not None
    kind = cmd.WhichOneof("kind")
    if kind != "pass":
        if seat in w.auto:
            raise RuleViolation("NP-D7", "the seat's standing auto-pass answers this window round with a pass")
        if w.kind == "card":
            if kind not in ("play_for_influence", "play_or_effect"):
                raise RuleViolation("NP-C23", "a card window takes a pass or a card play")
            check_play(tx.s, seat, kind, msg, window=True)
        elif kind != "buy_reroll" or not claim_legal(tx.s, seat, cmd, "reroll"):
            raise RuleViolation("NP-D6", "a reroll window takes a pass or an affordable reroll")
    tx.emit("window_answered", seat=seat, answer=cmd)
