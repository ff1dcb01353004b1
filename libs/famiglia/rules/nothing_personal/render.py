"""Short text forms of state, commands and events for logs, assertions and playthroughs."""

from __future__ import annotations

from google.protobuf import text_format

from famiglia.nothing_personal.v1 import nothing_personal_pb2 as pb

from .data import GIDX
from .state import State


def render_state(s: State) -> str:
    spots = []
    for i, gid in enumerate(s.board):
        if not gid:
            continue
        st = s.gs[GIDX[gid]]
        name = str(i + 1) if i < 9 else f"A{i - 8}"
        marks = "/".join(str(m) for m in st.markers)
        extra = (f" n{st.neutral}" if st.neutral else "") + (f" c{st.coin}" if st.coin >= 0 else "") \
            + (" O" if st.omerta else "") + (" S" if st.sideways else "")
        spots.append(f"{name}:{gid}[{marks}{extra}]")
    return (f"r{s.round} {s.phase}/{s.stage} p{s.pos} ring:{s.ring} respect:{list(s.respect)} "
            f"money:{list(s.money)} hands:{[len(h) for h in s.hands]} deck:{len(s.deck)} "
            f"discard:{len(s.discard)} gdeck:{len(s.gdeck)} " + " ".join(spots))


def _short(msg) -> str:
    return text_format.MessageToString(msg, as_one_line=True)


def render_command(command: pb.Command) -> str:
    kind = command.WhichOneof("kind") or "?"
    body = _short(getattr(command, kind)) if kind != "?" else ""
    return f"{kind}({body})" if body else kind


def render_event(event: pb.Event) -> str:
    kind = event.WhichOneof("kind") or "?"
    body = _short(getattr(event, kind)) if kind != "?" else ""
    return f"{kind}({body})" if body else kind
