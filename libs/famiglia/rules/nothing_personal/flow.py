"""The phase table (NP-R1): who acts at each step, and the automatic steps between decisions.

`decision(s)` says which decision is open and whose it is; `pending` and `legal_commands`
read it. `advance(tx)` runs the automatic steps (scoring, draws, arrests, promotions...) until a
decision is open or the game is over. Each stage of a phase is one row of `STEPS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from famiglia.engine import DecisionKind, Pending

from . import crew, family
from .crew import eligible, window_step
from .data import TIMEOUTS
from .rounds import begin_round, next_commission_turn
from .state import Phase, State, Window
from .tx import Tx


@dataclass(frozen=True, slots=True)
class Decision:
    kind: str                  # ruling | invite | vacancy | window | action | blackmail | setup | commission | buy
    seats: tuple[int, ...]
    dk: DecisionKind
    private: bool = False
    timeout: float = 0.0
    auto: tuple[int, ...] = ()   # seats on the auto-pass clock instead (NP-D7; private rows only)
    clock: str = ""              # its TIMEOUTS key (NP-D1)


def decision(s: State) -> Decision | None:
    """The open decision (memoised on the immutable state; `state.replace` drops the memo)."""
    memo = s.__dict__.get("_memo", UNSET)
    if memo is UNSET:
        memo = s.__dict__["_memo"] = _decision(s)
    return memo   # type: ignore[no-any-return]


UNSET = object()   # "no memo yet" (None is a decision: nobody decides)


# Decisions are interned (a handful of kinds and seat tuples), each with its `Pending` rows built once.
_INTERNED: dict[tuple, Decision] = {}
_PENDINGS: dict[int, tuple[Pending, ...]] = {}   # id of an interned Decision (never dropped) -> rows


def _make(key: tuple, kind: str, seats: tuple[int, ...], dk: DecisionKind, private: bool,
          clock: str, auto: tuple[int, ...] = ()) -> Decision:
    """`clock`: the decision's `TIMEOUTS` key (a match may set its own, `Config.timeouts`);
    `auto`: seats whose clock is the auto-pass one (NP-D7), in private rows only."""
    timeout = TIMEOUTS[clock]
    d = _INTERNED[key] = Decision(kind, seats, dk, private, timeout, auto, clock)
    _PENDINGS[id(d)] = tuple(Pending(seat, dk, kind, private, _T_AUTO if seat in auto else timeout)
                             for seat in seats)
    return d


# A window's decision by its content (kind, seats asked, answers so far): answers repeat across states.
_WINDOWS: dict[Window, Decision | None] = {}

_T_AUTO = TIMEOUTS["auto_pass"]
_TURN = DecisionKind.TURN
_RESPONSE = DecisionKind.RESPONSE
_TIE_BREAK = DecisionKind.TIE_BREAK


def _decision(s: State) -> Decision | None:
    """The open decision, by priority: rulings and nested choices first, then windows, then turns."""
    if s.phase == Phase.OVER:
        return None
    get = _INTERNED.get
    r = s.ruling
    if r is not None and r.answer < 0:                                                             # NP-D9
        key: tuple = ("ruling", s.ring)
        return get(key) or _make(key, "ruling", (s.ring,), _TIE_BREAK, False, "ruling")
    if s.invite is not None:                                                                       # NP-D12
        key = ("invite", s.invite.seat)
        return get(key) or _make(key, "invite", (s.invite.seat,), _TURN, False, "invite")
    if s.vacancy is not None:
        key = ("vacancy", s.vacancy.decider)
        return get(key) or _make(key, "vacancy", (s.vacancy.decider,), _TURN, False, "vacancy")
    w = s.window
    if w is not None:   # NP-D5, NP-D6, NP-H9: who a window waits for is private
        d = _WINDOWS.get(w, UNSET)   # keyed by the window itself: a (kind, seats, answers, auto) tuple
        if d is UNSET:
            answers = w.answers
            seats = tuple([i for i in w.seats if answers[i] is None])
            d = None
            if seats:
                # NP-D7: an auto-passing seat is asked like the others, on a clock that runs out at once
                auto = tuple([i for i in w.auto if answers[i] is None])
                key = (w.kind, seats, auto)
                d = get(key) or _make(key, "window", seats, _RESPONSE, True,
                                      "card_window" if w.kind == "card" else "reroll_window", auto)
            if len(_WINDOWS) >= 4096:
                _WINDOWS.clear()
            _WINDOWS[w] = d
        return d   # type: ignore[return-value]
    a = s.act
    if a is not None and s.stage == "action":
        if a.stage == 0:                                                                           # NP-D10
            key = ("action", a.seat)
            return get(key) or _make(key, "action", (a.seat,), _TURN, False, "action")
        if a.stage == 1:
            owner = crew.coin_owner(s)
            key = ("blackmail", owner)
            return get(key) or _make(key, "blackmail", (owner,), _RESPONSE, False, "blackmail")
        return None
    phase = s.phase
    if phase == Phase.COMMISSION:
        if s.stage == "turn":                                                                      # NP-D4
            key = ("commission", s.turn)
            return get(key) or _make(key, "commission", (s.turn,), _TURN, False, "commission")
        return None
    if phase == Phase.SETUP and s.stage == "marker" and s.idx < len(s.order):                     # NP-D3
        key = ("setup", s.order[s.idx])
        return get(key) or _make(key, "setup", (s.order[s.idx],), _TURN, False, "setup")
    if phase == Phase.FENCE and s.stage == "buy" and s.idx < len(s.order):                        # NP-D13
        key = ("buy", s.order[s.idx])
        return get(key) or _make(key, "buy", (s.order[s.idx],), _TURN, False, "buy")
    return None


def pending(s: State) -> list[Pending]:
    d = s.__dict__.get("_memo", UNSET)   # `decision` written out: asked once per command
    if d is UNSET:
        d = decision(s)
    if d is None:
        return []
    if s.cfg.timeouts:   # NP-D1: the match sets its own clocks
        own = dict(s.cfg.timeouts).get(d.clock)
        if own is not None:
            return [p if p.seat in d.auto else replace(p, timeout_seconds=own) for p in _PENDINGS[id(d)]]
    return list(_PENDINGS[id(d)])


# -- steps ------------------------------------------------------------------------------------------------------
def _setup_done(tx: Tx) -> None:
    """NP-S12: when setup is complete, round 1 begins with the Commission."""
    begin_round(tx, 1)




STEPS: dict[tuple[str, str], Callable[[Tx], None]] = {
    (Phase.SETUP, "marker"): _setup_done,
    (Phase.COMMISSION, "after"): next_commission_turn,
    (Phase.CREW, "score_window"): crew.score_window,
    (Phase.CREW, "score"): crew.score,
    (Phase.CREW, "scored"): crew.next_score,
    (Phase.CREW, "act_window"): crew.act_window,
    (Phase.CREW, "act"): crew.start_action_turn,
    (Phase.CREW, "roll"): lambda tx: window_step(tx, "reroll", "roll_result"),
    (Phase.CREW, "roll_result"): crew.resolve_roll,
    (Phase.CREW, "act_done"): crew.next_act,
    (Phase.FENCE, "window"): lambda tx: window_step(tx, "card", "draws"),
    (Phase.FENCE, "draws"): family.fence_draws,
    (Phase.FENCE, "buy"): family.fence_done,
    (Phase.FEDS, "window"): lambda tx: window_step(tx, "card", "arrest"),
    (Phase.FEDS, "arrest"): family.arrests,
    (Phase.FAMILY, "window"): lambda tx: window_step(tx, "card", "capo"),
    (Phase.FAMILY, "capo"): family.capo_first,
    (Phase.FAMILY, "fill"): family.fill,
    (Phase.FAMILY, "assoc"): family.associates_and_bookkeeping,
    (Phase.FINAL, "score"): family.final_score,
    (Phase.FINAL, "scored"): family.final_next,
    (Phase.FINAL, "sell"): family.final_sell,
}


def advance(tx: Tx) -> None:
    """Run automatic steps until a decision is open or the game is over."""
    guard = 0
    over, steps = Phase.OVER, STEPS
    s = tx.s
    while s.phase != over:
        memo = s.__dict__
        d = memo.get("_memo", UNSET)   # `decision` written out: most states here are new
        if d is UNSET:
            d = memo["_memo"] = _decision(s)
        if d is not None:
            break
        steps[(s.phase, s.stage)](tx)
        s = tx.s
        guard += 1
        if guard > 10_000:
            raise AssertionError(f"no progress in {s.phase}/{s.stage}")


__all__ = ["advance", "decision", "eligible", "pending", "STEPS"]
