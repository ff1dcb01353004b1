"""The Crew (NP-W): scoring sweep, action sweep, Moves, Whacks, dice, rerolls, blackmail, windows.

Also the resolution of window claims (NP-D5, NP-D6, NP-X22), shared by every phase's card windows.
"""

from __future__ import annotations

from typing import Any

from famiglia.engine import RuleViolation
from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb

from .board import at, gstate, is_active, leaders, passive, ring_order, strict
from .data import (
    CAPO_WHACK_SURCHARGE,
    DICE,
    GIDX,
    POSITIONS,
    REROLL_PRICE,
    SWING,
    WHACK_SUCCESS,
    G,
)
from .effects import DICE_CODES, EFFECTS, Ctx, target_key
from .events import PASS as _PASS
from .plays import check_play, resolve_play
from .rounds import begin_phase
from .state import Act, Phase, State
from .tx import Tx


# -- windows (NP-R4, NP-R5, NP-D5, NP-D6, NP-D7) ---------------------------------------------------------
def eligible(s: State, kind: str) -> tuple[int, ...]:
    """NP-D7: public tests only: a card in hand, or $10 / a free reroll right.

    A seat's standing auto-pass is private, so it never keeps the seat out of a window (that would
    show in whether the public WindowOpened appears, NP-H9): the seat is asked like any other and its
    pass arrives at once through its window clock (`flow`, TIMEOUTS["auto_pass"]), as its own command."""
    out = []
    for seat in ring_order(s):
        if kind == "card":
            if s.hands[seat]:
                out.append(seat)
        elif s.money[seat] >= REROLL_PRICE or free_means(s, seat):
            out.append(seat)
    return tuple(out)


def window_step(tx: Tx, kind: str, then: str) -> None:
    """Open an answer round, or close the window when all passed, or resolve the first claim."""
    s = tx.s
    w = s.window
    if w is None:
        seats = eligible(s, kind)
        if seats:
            tx.emit_values("window_opened", kind, seats)
        else:
            tx.emit_values("step_advanced", then, s.pos)
        return
    claims = [(seat, w.answers[seat]) for seat in ring_order(s) if w.answers[seat]]
    if not claims:
        tx.emit_values("window_closed", kind)
        tx.emit_values("step_advanced", then, s.pos)
        return
    if not resolve_claims(tx, kind, claims):  # every claim lapsed, each as a pass: all passed
        tx.emit_values("step_advanced", then, tx.s.pos)


# -- rulings (NP-W4, NP-D9) -------------------------------------------------------------------------------
def controller(tx: Tx, gid: str, use: str, lead: tuple[int, ...] | None = None) -> int:
    """The controller for one use: strict control, or the ring holder's ruling (asked if needed).
    `lead`: the gangster's `leaders` when the caller has just computed them.

    Returns -1 when nobody controls it, -2 when a ruling has just been asked.
    """
    if lead is None:
        lead = leaders(tx.s, gid)
    if not lead:
        return -1
    if len(lead) == 1:
        return lead[0]
    r = tx.s.ruling
    if r is not None and r.gangster == gid and r.use == use and r.answer >= 0:
        return r.answer
    tx.emit_values("tie_ruling_asked", gid, lead, use)
    return -2


# -- scoring sweep (NP-W11) ------------------------------------------------------------------------------------
def score_window(tx: Tx) -> None:
    if not at(tx.s, tx.s.pos):
        next_score(tx)
        return
    window_step(tx, "card", "score")


def score(tx: Tx) -> None:
    s = tx.s
    gid = at(s, s.pos)
    if not gid:
        next_score(tx)
        return
    seat = controller(tx, gid, "score")
    if seat == -2:
        return
    if seat >= 0:
        pos, g = POSITIONS[s.pos], G[gid]
        tx.respect({seat: pos.respect.apply(g.respect)}, "scoring")        # NP-W10, NP-W13
        tx.money(seat, pos.money.apply(g.money), "scoring")
        tx.emit_values("position_scored", s.pos, gid, seat)
    next_score(tx)


def next_score(tx: Tx) -> None:
    p = tx.s.pos
    if p > 1:
        tx.emit_values("crew_position_reached", 0, p - 1)   # sweep 0, the next position
    else:
        tx.emit_values("crew_position_reached", 1, 1)   # sweep 1 from position 1


# -- action sweep (NP-W14..W16) ------------------------------------------------------------------------------
def _upright(s: State, gid: str) -> bool:
    return bool(gid) and not gstate(s, gid).sideways


def act_window(tx: Tx) -> None:
    if not _upright(tx.s, at(tx.s, tx.s.pos)):
        next_act(tx)
        return
    window_step(tx, "card", "act")


def start_action_turn(tx: Tx) -> None:
    s = tx.s
    gid = at(s, s.pos)
    lead = leaders(s, gid) if _upright(s, gid) else ()
    if not lead:
        next_act(tx)
        return
    if gstate(s, gid).omerta:   # NP-W16: forced pass, no ruling asked
        tx.emit("omerta_observed", position=s.pos, gangster=gid)
        return
    seat = controller(tx, gid, "act", lead)
    if seat == -2:
        return
    tx.emit_values("action_turn_began", s.pos, gid, seat)


def next_act(tx: Tx) -> None:
    p = tx.s.pos
    if p < 9:
        tx.emit_values("crew_position_reached", 1, p + 1)   # sweep 1, the next position
        return
    for gid in tx.s.board:   # NP-W17: unused Omerta coins return at the end of the Crew
        if gid and gstate(tx.s, gid).omerta:
            tx.emit("omerta_coin_returned", gangster=gid)
    begin_phase(tx, Phase.FENCE)


def coin_owner(s: State) -> int:
    a = s.act
    assert a is not None
    return gstate(s, a.gangster).coin


def blackmailed(s: State) -> bool:
    """NP-W18, NP-W19: a coin of another seat on the acting gangster; one's own coin has no effect."""
    a = s.act
    if a is None:
        return False
    owner = gstate(s, a.gangster).coin
    return owner >= 0 and owner != a.seat


# -- the four choices of an action turn (NP-W14, NP-W20) ----------------------------------------------------------
def _whack_cost(s: State, act_pos: int, code: str, target: str) -> int:
    base = {"WHACK_10": 10, "WHACK_5": 5, "WHACK_LOWER_FREE": 0}[code]
    if target == s.board[8]:
        base += CAPO_WHACK_SURCHARGE        # NP-W31 passive
    return base


def plain_targets(t: pb.Targets) -> None:
    """NP-X21: the chosen action is repeated in a public event (action_chosen, blackmail_proposed),
    so its Targets may name gangsters by id only, and no more of them than an ability reads
    (NEUTRAL_3: three, REMOVE_2 and SWAP_2: two markers); anything else would reach every seat."""
    names = (t.gangster, t.destination, *t.gangsters, *(r.gangster for r in t.markers))
    if len(t.gangsters) > 3 or len(t.markers) > 2 or any(g and g not in GIDX for g in names):
        raise RuleViolation("NP-X21", "targets name at most 3 gangsters and 2 markers, by gangster id")


def check_action(s: State, cmd: pb.Command) -> None:
    """Raise unless `cmd` is a legal choice of the open action turn (its cost payable, NP-W20)."""
    a = s.act
    assert a is not None
    kind = cmd.WhichOneof("kind")
    if a.gangster != at(s, a.position):
        raise RuleViolation("NP-X10", "the acting gangster has left its position")
    ctx = Ctx(a.seat, a.gangster, a.position)
    if kind == "pass":
        return
    if kind == "use_ability":
        m = cmd.use_ability
        code = G[a.gangster].ability if m.gangster_ability else POSITIONS[a.position].ability
        if code not in EFFECTS or not (m.gangster_ability or code != "WHACK_10"):
            raise RuleViolation("NP-W21", f"{code or 'no ability'} is not usable this way")
        if m.gangster_ability and code not in EFFECTS:
            raise RuleViolation("NP-W21", "this gangster has no action ability")
        EFFECTS[code].check(s, ctx, m.targets)
        plain_targets(m.targets)   # after the ability's own checks, which name their rules
        return
    if kind == "whack":
        w = cmd.whack
        if w.gangster_ability:
            code = G[a.gangster].ability
            if code not in ("WHACK_5", "WHACK_LOWER_FREE"):
                raise RuleViolation("NP-W21", "this gangster cannot whack")
        else:
            code = POSITIONS[a.position].ability
            if code != "WHACK_10":
                raise RuleViolation("NP-W23", "only the Third Guy whacks by position")
        if not is_active(s, w.target):   # "" (an empty spot) and unknown ids included (NP-X9)
            raise RuleViolation("NP-W43", f"whack another active gangster; {w.target or '(none)'} is not one")
        if w.target == a.gangster:
            raise RuleViolation("NP-W43", "a gangster cannot whack itself")
        if code == "WHACK_LOWER_FREE" and s.board.index(w.target) + 1 >= a.position:
            raise RuleViolation("NP-W21", "WHACK_LOWER_FREE targets a lower-numbered position")
        if s.money[a.seat] < _whack_cost(s, a.position, code, w.target):
            raise RuleViolation("NP-W20", "the whack's cost cannot be paid")
        return
    if kind == "make_a_move":
        mv = cmd.make_a_move
        q = mv.target_position
        if mv.gangster_ability:
            if G[a.gangster].ability != "MOVE_ANY_HIGHER" or q <= a.position:
                raise RuleViolation("NP-W21", "MOVE_ANY_HIGHER targets a higher position")
        elif q not in POSITIONS[a.position].arrows:
            raise RuleViolation("NP-W33", f"no move arrow from {a.position} to {q}")
        if not 1 <= q <= 9 or not at(s, q):
            raise RuleViolation("NP-X9", "the target position must be occupied")
        return
    raise RuleViolation("NP-W14", "not an action turn choice")


def action_options(s: State, limit: int = 16) -> list[pb.Command]:
    a = s.act
    assert a is not None
    out = [_PASS]
    ctx = Ctx(a.seat, a.gangster, a.position)
    pcode = POSITIONS[a.position].ability
    if pcode == "WHACK_10":
        out += _whacks(s, "WHACK_10", False, limit)
    else:
        for t in EFFECTS[pcode].options(s, ctx, limit):
            out.append(_ability(False, t))
    gcode = G[a.gangster].ability
    if gcode in ("WHACK_5", "WHACK_LOWER_FREE"):
        out += _whacks(s, gcode, True, limit)
    elif gcode == "MOVE_ANY_HIGHER":
        out += [_move(q, True) for q in range(a.position + 1, 10) if at(s, q)]
    elif gcode in EFFECTS:
        for t in EFFECTS[gcode].options(s, ctx, limit):
            out.append(_ability(True, t))
    out += [_move(q, False) for q in POSITIONS[a.position].arrows if at(s, q)]
    return out


# Action choices are shared, read-only messages built once per content (the contract allows it).
_CHOICES: dict[tuple, pb.Command] = {}


def _choice(key: tuple, build: Any) -> pb.Command:
    command = _CHOICES.get(key)
    if command is None:
        if len(_CHOICES) >= 20_000:
            _CHOICES.clear()
        command = _CHOICES[key] = build()
    return command


def _ability(gangster_ability: bool, t: pb.Targets) -> pb.Command:
    key = ("ability", gangster_ability, target_key(t))
    return _CHOICES.get(key) or _choice(   # (looked up first: no builder made on a hit)
        key, lambda: pb.Command(use_ability=pb.UseAbility(gangster_ability=gangster_ability, targets=t)))


def _move(q: int, gangster_ability: bool) -> pb.Command:
    key = ("move", q, gangster_ability)
    command = _CHOICES.get(key)
    if command is not None:
        return command
    if gangster_ability:
        return _choice(key, lambda: pb.Command(make_a_move=pb.MakeAMove(target_position=q, gangster_ability=True)))
    return _choice(key, lambda: pb.Command(make_a_move=pb.MakeAMove(target_position=q)))


def _whacks(s: State, code: str, gangster_ability: bool, limit: int) -> list[pb.Command]:
    a = s.act
    assert a is not None
    out = []
    for i, g in enumerate(s.board[:9]):
        if not g or g == a.gangster:
            continue
        if code == "WHACK_LOWER_FREE" and i + 1 >= a.position:
            continue
        if s.money[a.seat] >= _whack_cost(s, a.position, code, g):
            key = ("whack", g, gangster_ability)
            out.append(_CHOICES.get(key) or _choice(
                key, lambda g=g: pb.Command(whack=pb.Whack(target=g, gangster_ability=gangster_ability))))
    return out[:limit]


def resolve_action(tx: Tx, cmd: pb.Command) -> None:
    """Carry out a chosen (or accepted) action; the cost is paid now, before any die (NP-W20)."""
    s = tx.s
    a = s.act
    assert a is not None
    kind = cmd.WhichOneof("kind")
    _contracts_on_action(tx, cmd)
    if kind == "pass":
        tx.emit_values("action_turn_ended", a.position, "pass")
        return
    ctx = Ctx(a.seat, a.gangster, a.position)
    if kind == "use_ability":
        m = cmd.use_ability
        code = G[a.gangster].ability if m.gangster_ability else POSITIONS[a.position].ability
        if code in DICE_CODES:
            if code == "DOUBLE_OR_NOTHING":
                tx.money(a.seat, -5, "double or nothing")
            _roll(tx, "number", {"DICE_MONEY": "dice_money", "DICE_RESPECT": "dice_respect",
                                 "DOUBLE_OR_NOTHING": "double"}[code], a.seat, a.gangster)
            return
        EFFECTS[code].apply(tx, ctx, m.targets)
        if tx.s.invite is None:
            tx.emit_values("action_turn_ended", a.position, code)
        return
    if kind == "whack":
        w = cmd.whack
        code = G[a.gangster].ability if w.gangster_ability else "WHACK_10"
        cost = _whack_cost(s, a.position, code, w.target)
        if cost:
            tx.money(a.seat, -cost, "whack")
        _roll(tx, "whack", "whack", a.seat, a.gangster, target=w.target)
        return
    _roll(tx, "move", "move", a.seat, a.gangster, target_position=cmd.make_a_move.target_position)


def _roll(tx: Tx, die: str, purpose: str, actor: int, gangster: str, target: str = "",
          target_position: int = 0) -> None:
    face = tx.rng.choice(DICE[die])
    tx.emit_values("die_rolled", die, face, purpose, actor, gangster, target, target_position)


# -- rerolls (NP-W44, NP-W45, NP-D6, NP-V9) ---------------------------------------------------------------------------
def free_means(s: State, seat: int) -> list[Any]:
    """Free reroll rights of `seat` in the open roll: FREE_REROLL, WHACK_FREE_REROLL, a token."""
    out = []
    r = s.roll
    for gid in _free_rerollers(s.board):
        if gid not in s.free_used and strict(s, gid) == seat:
            out.append(pb.REROLL_FREE_RING)       # NP-W6: strict control only
            break
    if (r is not None and r.purpose == "whack" and r.actor == seat and not r.free_whack_used
            and passive(s, r.gangster, "WHACK_FREE_REROLL")):
        out.append(pb.REROLL_FREE_WHACK)
    if s.cfg.reroll_tokens and s.tokens[seat] > 0:
        out.append(pb.REROLL_TOKEN)
    return out


def reroll_means(s: State, seat: int) -> list[Any]:
    out = [pb.REROLL_PAY] if s.money[seat] >= REROLL_PRICE else []
    return out + free_means(s, seat)


_FREE_REROLLERS: dict[tuple[str, ...], tuple[str, ...]] = {}


def _free_rerollers(board: tuple[str, ...]) -> tuple[str, ...]:
    """The active FREE_REROLL gangsters of a board, in spot order (memoised per board)."""
    gids = _FREE_REROLLERS.get(board)
    if gids is None:
        if len(_FREE_REROLLERS) >= 4096:
            _FREE_REROLLERS.clear()
        gids = _FREE_REROLLERS[board] = tuple(g for g in board[:9] if g and G[g].ability == "FREE_REROLL")
    return gids


def _free_gangster(s: State, seat: int) -> str:
    for gid in _free_rerollers(s.board):
        if gid not in s.free_used and strict(s, gid) == seat:
            return gid
    return ""


def claim_legal(s: State, seat: int, cmd: pb.Command, kind: str) -> bool:
    k = cmd.WhichOneof("kind")
    if kind == "reroll":
        return k == "buy_reroll" and cmd.buy_reroll.means in reroll_means(s, seat)
    if k not in ("play_for_influence", "play_or_effect"):
        return False
    try:
        check_play(s, seat, k, getattr(cmd, k), window=True)
    except RuleViolation:
        return False
    return True


def resolve_claims(tx: Tx, kind: str, claims: list[tuple[int, bytes | None]]) -> bool:
    """NP-D5, NP-D6, NP-X22: the first still-legal claim in ring order resolves; the rest lapse.
    False when none was still legal: the window closes, as after a round of passes."""
    s = tx.s
    winner = -1
    chosen: pb.Command | None = None
    for seat, data in claims:
        cmd = pb.Command.FromString(data or b"")
        if claim_legal(s, seat, cmd, kind):
            winner, chosen = seat, cmd
            break
    # The lapsed claims ride on the one public event that ends the round, each shown only to
    # its own seat (view.redact): events of their own would each take a version (NP-H9).
    lapsed = tuple(seat for seat, _ in claims if seat != winner)
    if chosen is None:
        tx.emit_values("window_closed", kind, lapsed)
        return False
    tx.emit("claim_resolved", seat=winner, claim=chosen, lapsed=lapsed)
    if kind == "reroll":
        means = chosen.buy_reroll.means
        r = tx.s.roll
        assert r is not None
        tx.emit("reroll_bought", seat=winner, means=means,
                gangster=_free_gangster(tx.s, winner) if means == pb.REROLL_FREE_RING else "")
        _roll(tx, r.die, r.purpose, r.actor, r.gangster, r.target, r.target_pos)
        return True
    k = str(chosen.WhichOneof("kind"))
    resolve_play(tx, winner, k, getattr(chosen, k), window=True)
    return True


# -- roll results (NP-W35..W43, Table F dice codes) ----------------------------------------------------------------
def resolve_roll(tx: Tx) -> None:
    s = tx.s
    r = s.roll
    assert r is not None and s.act is not None
    pos = s.act.position
    if r.purpose == "move":
        _move_result(tx, r.face, r.actor, r.gangster, r.target_pos)
    elif r.purpose == "whack":
        _whack_result(tx, r.face, r.actor, r.gangster, r.target)
    else:
        n = int(r.face)
        if r.purpose == "dice_money":
            tx.money(r.actor, n, "DICE_MONEY")
        elif r.purpose == "dice_respect":
            tx.respect({r.actor: 3 if n >= 5 else (-2 if n == 1 else 0)}, "DICE_RESPECT")
        elif n >= 4:
            tx.money(r.actor, 12, "DOUBLE_OR_NOTHING")
        tx.emit_values("action_turn_ended", pos, r.purpose)
    return


def _loser(tx: Tx, target: str) -> int:
    """Who loses Respect to a successful Move or Whack on `target`: its controller, a tie ruled by
    the ring (NP-W4) — unless the target's printed Respect is 0 or less, when nobody's Respect
    changes (NP-W39) and nothing needs its controller, so no ruling is asked (-1)."""
    return controller(tx, target, "loser") if G[target].respect > 0 else -1


def _swing(tx: Tx, actor: int, loser: int, target: str, reason: str) -> None:
    """NP-W36, NP-W41, NP-W39, NP-X8, NP-X13."""
    if G[target].respect <= 0:
        return
    deltas = {actor: SWING}
    if loser >= 0:
        deltas[loser] = deltas.get(loser, 0) - SWING
    tx.respect(deltas, reason)


def _move_result(tx: Tx, face: str, actor: int, mover: str, q: int) -> None:
    s = tx.s
    pos = s.act.position if s.act else 0
    if not is_active(s, mover):
        tx.emit_values("action_turn_ended", pos, "gone")
        return
    if face == "knife":                                   # NP-W38
        tx.respect({actor: -SWING}, "move death")
        tx.emit("move_resolved", mover=mover, target_position=q, outcome="death")
        tx.gone(mover, "fishes", "move death")
        tx.emit_values("action_turn_ended", pos, "death")
        return
    bonus = 1 if passive(s, mover, "MOVE_BONUS") else 0
    target = at(s, q)
    ok = face == "ring" or (face.isdigit() and int(face) + G[mover].respect + bonus > q)
    if ok and target:
        loser = _loser(tx, target)
        if loser == -2:
            return
        tx.emit("gangsters_exchanged", first_spot=s.board.index(mover), second_spot=q - 1, sideways=True)
        _swing(tx, actor, loser, target, "move")
        tx.emit("move_resolved", mover=mover, target_position=q, outcome="success")
    else:
        tx.respect({actor: -SWING}, "move failure")        # NP-W37
        tx.emit("move_resolved", mover=mover, target_position=q, outcome="failure")
    if tx.s.neutral > 0:                                   # NP-X1
        tx.emit_values("markers_placed", mover, -1, 1)   # one neutral marker
    tx.emit_values("action_turn_ended", pos, "move")


def _whack_result(tx: Tx, face: str, actor: int, whacker: str, target: str) -> None:
    s = tx.s
    pos = s.act.position if s.act else 0
    if face in WHACK_SUCCESS:
        if is_active(s, target):
            loser = _loser(tx, target)
            if loser == -2:
                return
            _swing(tx, actor, loser, target, "whack")
            tx.emit("whack_resolved", whacker=whacker, target=target, outcome="success")
            tx.gone(target, "fishes", "whack")
        else:
            tx.emit("whack_resolved", whacker=whacker, target=target, outcome="gone")
    elif face == "X":
        tx.respect({actor: -SWING}, "whack failure")
        tx.emit("whack_resolved", whacker=whacker, target=target, outcome="failure")
    else:
        tx.respect({actor: -SWING}, "whacker death")
        tx.emit("whack_resolved", whacker=whacker, target=target, outcome="death")
        if is_active(s, whacker):
            tx.gone(whacker, "fishes", "whacker death")
    tx.emit_values("action_turn_ended", pos, "whack")


# -- contracts on actions (NP-V3, NP-V4) -----------------------------------------------------------------------------
def _action_kind(a: Act, cmd: pb.Command) -> tuple[str, tuple[str, ...]]:
    """The action's kind and the gangsters it is taken against (NP-V3): an ability names them
    in the target fields it uses (`Effect.against`: a gangster, markers on gangsters, neutral
    markers' gangsters, a destination); a gangster written in a field it ignores counts for
    nothing, or a junk field could settle a contract."""
    kind = cmd.WhichOneof("kind")
    if kind == "pass":
        return "pass", ()
    if kind == "whack":
        return "whack", (cmd.whack.target,)
    if kind == "make_a_move":
        return "move", ()
    m = cmd.use_ability
    t = m.targets
    code = G[a.gangster].ability if m.gangster_ability else POSITIONS[a.position].ability
    named: list[str] = []
    for field in EFFECTS[code].against if code in EFFECTS else ():
        if field == "gangster":
            named.append(t.gangster)
        elif field == "gangsters":
            named.extend(t.gangsters)
        elif field == "markers":
            named.extend(r.gangster for r in t.markers)
        else:  # "destination"
            named.append(t.destination)
    return ("gangster" if m.gangster_ability else "position"), tuple(g for g in named if g)


def _contracts_on_action(tx: Tx, cmd: pb.Command) -> None:
    s = tx.s
    a = s.act
    if not s.contracts or a is None:
        return
    kind, targets = _action_kind(a, cmd)
    if kind == "move":
        targets = (at(s, cmd.make_a_move.target_position),)
    for c in s.contracts:
        if c.condition == "ACTION_BY" and c.seat == a.seat and c.gangster == a.gangster and c.action == kind \
                and (not c.target or c.target in targets):
            tx.emit("contract_settled", id=c.id, to=c.payee, how="paid")
        elif c.condition == "NOT_TARGETED" and c.seat == a.seat and kind in ("whack", "move") \
                and c.gangster in targets:
            tx.emit("contract_settled", id=c.id, to=c.payer, how="returned")


def proposal(s: State) -> pb.Command:
    a = s.act
    assert a is not None
    return pb.Command.FromString(a.proposal)
