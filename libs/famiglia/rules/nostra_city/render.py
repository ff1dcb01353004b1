"""Short text forms of states, commands and events (logs, playthroughs)."""

from __future__ import annotations

from google.protobuf import text_format

from famiglia.nostra_city.v1 import nostra_city_pb2 as pb

from .queries import seat_respect
from .state import State


def render_state(state: State) -> str:
    head = (f"month:{state.month} phase:{state.phase.value} turn:{state.turn_seat} fp:{state.first_player} "
            f"V:{state.verdict} street:[{' '.join(c or '-' for c in state.street)}] "
            f"deck:{len(state.street_deck)} notes:{len(state.note_deck)} pile:{len(state.pile)}")
    if state.choice is not None:
        head += f" choice:{state.choice.kind}@{state.choice.seat}"
    rows = [head]
    for i, p in enumerate(state.players):
        guys = " ".join(w + ("*" if w in p.busy else "") for w in p.wiseguys)
        turfs = " ".join(t + ("*" if t in p.busy else "") for t in p.turfs)
        rows.append(f"  seat {i}: R{seat_respect(state, i)} wg[{guys}] turf[{turfs}] bank:{len(p.bank)} "
                    f"hand:{len(p.hand)} trophies:[{' '.join(p.trophies)}]")
    return "\n".join(rows)


def _short(message: object) -> str:
    kind = message.WhichOneof("kind")  # type: ignore[attr-defined]
    if kind is None:
        return "empty"
    body = text_format.MessageToString(getattr(message, kind), as_one_line=True)
    return f"{kind} {body}".strip()


def render_command(command: pb.Command) -> str:
    return _short(command)


def render_event(event: pb.Event) -> str:
    return _short(event)
