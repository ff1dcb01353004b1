"""Short text forms of states, commands and events, for logs, assertions and playthroughs."""

from __future__ import annotations

from typing import Any

from .commands import Command
from .data import ACTION_NAMES, NOBODY
from .events import SHARED, SPLITS_MADE, Event
from .state import State

SIDES = {1: "yes", 2: "no"}
VIS = {1: "open", 2: "peek", 3: "hidden"}
STEPS = {
    1: "SHOW_LOOT",
    2: "DISTRIBUTE",
    3: "ACTIONS",
    4: "THREAT_TURNS",
    5: "CARD_CHOICE",
    6: "RESOLVE",
    7: "OVER",
}


def _cards(cards: Any) -> str:
    return "[" + " ".join(cards) + "]"


def render_state(state: State) -> str:
    s = state
    parts = [
        f"round:{s.round}",
        f"step:{s.step.name}",
        f"boss:{s.boss}",
        f"pile:{len(s.pile)}",
        f"table:{_cards(s.table)}",
    ]
    if s.assignment:
        parts.append("assigned:" + "".join(str(x) for x in s.assignment))
    if s.turn != NOBODY:
        parts.append(f"turn:{s.turn}")
    parts.append("stash:" + "/".join(str(len(x)) for x in s.stashes))
    if any(t != NOBODY for t in s.threats):
        parts.append("threats:" + ",".join("-" if t == NOBODY else str(t) for t in s.threats))
    if any(s.cards):
        parts.append(
            "cards:"
            + ",".join(
                ACTION_NAMES[c] + ("*" if k else "") for c, k in zip(s.cards, s.committed, strict=True)
            )
        )
    if s.config.payoff:
        parts.append("payoff:" + "/".join(str(n) for n in s.payoff_cards))
        if s.offers:
            parts.append("offers:" + ",".join(f"{o.briber}>{o.target}" for o in s.offers))
    if s.confiscated:
        parts.append(f"confiscated:{len(s.confiscated)}")
    return " ".join(parts)


def render_command(command: Command) -> str:
    kind = command.WhichOneof("kind")
    c: Any = getattr(command, kind) if kind else None
    match kind:
        case "assign_loot":
            return "assign " + " ".join(f"{a.card}>{a.seat}" for a in c.assignments)
        case "place_threat":
            return f"threaten {c.target}"
        case "withdraw_threat":
            return "withdraw threat"
        case "choose_action_card":
            return f"choose {ACTION_NAMES.get(c.card, c.card)}" + (" +commit" if c.commit else "")
        case "change_action_card":
            return f"change to {ACTION_NAMES.get(c.card, c.card)}"
        case "commit":
            return "commit"
        case "end_turn":
            return "end turn"
        case "give_gift":
            return (
                f"gift to {c.receiver} {_cards(c.loot)} +{c.payoff_cards}p {'open' if c.open else 'private'}"
            )
        case "make_offer":
            return (
                f"offer {c.target} {SIDES.get(c.side, '?')} {_cards(c.loot)} +{c.payoff_cards}p"
                f" {VIS.get(c.visibility, '?')}"
            )
        case "withdraw_offer":
            return f"withdraw offer {c.target}"
    return "(empty)"


def render_event(event: Event) -> str:
    fact = SHARED.get(id(event))
    if fact is None:
        split = SPLITS_MADE.get(id(event))
        if split is not None:  # a split decide just made: from its values
            return split[1] + " ".join(map("{}>{}".format, split[2], split[3]))
        return _render_event(event)
    text: str | None = fact[2]  # a prebuilt event: rendered the first time it is asked
    if text is None:
        text = fact[2] = _render_event(event)
    return text


def _render_event(event: Event) -> str:
    kind = event.WhichOneof("kind")
    e: Any = getattr(event, kind) if kind else None
    match kind:
        case "game_set_up":
            changed = [f"{o.key}={o.value}" for o in e.options if o.key in _SHOWN_OPTIONS]
            return f"GameSetUp seats:{e.seats} boss:{e.first_boss} " + " ".join(changed)
        case "stash_dealt":
            return f"StashDealt {e.seat} {_cards(e.cards) if e.cards else e.count}"
        case "pile_stacked":
            return f"PileStacked {len(e.cards)} fuzz_above:{e.fuzz_position}"
        case "round_started":
            return f"RoundStarted {e.round} boss:{e.boss} step:{STEPS.get(e.step, e.step)}"
        case "step_started":
            return f"StepStarted {STEPS.get(e.step, e.step)}" + (f" turn:{e.turn}" if e.turn >= 0 else "")
        case "loot_revealed":
            return f"LootRevealed {e.card}"
        case "fuzz_revealed":
            return f"FuzzRevealed cause:{e.cause}"
        case "loot_assigned":
            return "LootAssigned " + " ".join(f"{a.card}>{a.seat}" for a in e.assignments)
        case "threat_placed":
            return f"ThreatPlaced {e.seat}>{e.target}"
        case "threat_withdrawn":
            return f"ThreatWithdrawn {e.seat}"
        case "action_card_chosen":
            return f"ActionCardChosen {e.seat} {ACTION_NAMES.get(e.card, e.card)} #{e.choices}"
        case "committed":
            return f"Committed {e.seat}"
        case "turn_ended":
            return f"TurnEnded {e.seat}"
        case "actions_locked":
            return "ActionsLocked"
        case "action_revealed":
            return f"ActionRevealed {e.seat} {ACTION_NAMES.get(e.card, e.card)}" + (
                " out-of-turn" if e.out_of_turn else ""
            )
        case "loot_skimmed":
            return f"LootSkimmed {e.seat} {e.card or '?'}"
        case "skim_came_up_empty":
            return f"SkimCameUpEmpty {e.seat}"
        case "loot_stolen":
            what = "nothing" if e.nothing else (e.card or "?")
            return f"LootStolen {e.victim}>{e.thief} {what} {'counter' if e.cause == 2 else 'rob'}"
        case "vote_counted":
            return (
                f"VoteCounted yes:{e.yes} no:{e.no} {({1: 'passed', 2: 'tied', 3: 'failed'}).get(e.outcome)}"
            )
        case "loot_handed_out":
            return "LootHandedOut " + " ".join(f"{a.card}>{a.seat}" for a in e.assignments)
        case "loot_returned":
            return "LootReturned"
        case "boss_changed":
            return f"BossChanged {e.boss}"
        case "round_ended":
            return f"RoundEnded {e.round}"
        case "loot_confiscated":
            return f"LootConfiscated {_cards(e.cards)}"
        case "game_ended":
            return f"GameEnded reason:{e.reason}"
        case "stashes_revealed":
            return (
                "StashesRevealed "
                + " ".join(f"{s.seat}:{len(s.cards)}" for s in e.stashes)
                + f" pile:{len(e.pile)}"
            )
        case "gift_given":
            return f"GiftGiven {e.giver}>{e.receiver} {_cards(e.loot) if e.loot else e.loot_count} +{e.payoff_cards}p"
        case "offer_made":
            return (
                f"OfferMade {e.briber}>{e.target} {SIDES.get(e.side, '?')} "
                f"{_cards(e.loot) if e.loot else e.loot_count} +{e.payoff_cards}p {VIS.get(e.visibility, '?')}"
            )
        case "offer_withdrawn":
            return f"OfferWithdrawn {e.briber}>{e.target}"
        case "offer_resolved":
            return (
                f"OfferResolved {e.briber}>{e.target} to:{e.receiver} "
                f"{_cards(e.loot) if e.loot else e.loot_count} +{e.payoff_cards}p"
            )
    return "(empty)"


_SHOWN_OPTIONS = {"step3_mode", "payoff.enabled", "first_boss_seat", "winner_tiebreak"}
