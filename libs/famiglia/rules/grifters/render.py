"""Short text forms of states, commands and events (logs, assertion messages, playthroughs)."""

from __future__ import annotations

from typing import Any

from google.protobuf import text_format

from famiglia.grifters.v1 import grifters_pb2 as pb

from .state import State


def _night(group: tuple[str, ...], token: bool) -> str:
    if token:
        return "$"
    return "+".join(group) if group else "-"


def render_state(s: State) -> str:
    head = (f"round:{s.round} turn:{s.turn} active:{s.active} phase:{s.phase} coffers:{s.coffers} "
            f"deck:{len(s.deck)} discard:{len(s.discard)}")
    if s.choice:
        head += f" choice:{s.choice}"
    if s.caper is not None:
        head += f" caper:{s.caper.code}({s.caper.card or s.caper.job})"
    if s.over:
        head += f" over:{s.end_reason}"
    lines = [head, "jobs: " + " ".join(f"{c[0]}:{','.join(j) or '-'}" for c, j in s.stacks)]
    for seat, p in enumerate(s.players):
        nights = " ".join(_night(g, t) for g, t in zip(p.nights, p.tokens, strict=True))
        lines.append(f"seat {seat}: stash:{p.stash} hand:[{' '.join(p.hand)}] nights:[{nights}] "
                     f"refresh:[{' '.join(p.refresh)}] jobs:[{' '.join(p.jobs)}]"
                     + (f" in_play:[{' '.join(p.in_play)}]" if p.in_play else ""))
    return "\n".join(lines)


def _fields(msg: object) -> str:
    return text_format.MessageToString(msg, as_one_line=True)  # type: ignore[arg-type]


def render_command(command: pb.Command) -> str:
    kind = command.WhichOneof("kind") or "?"
    body: Any = getattr(command, kind) if kind != "?" else command
    if kind == "pull_caper":
        extra = pb.PullCaper()
        extra.CopyFrom(body)
        extra.ClearField("card")
        extra.ClearField("use_defaults")
        answers = f" [{_fields(extra)}]" if extra.ListFields() else ""
        return f"PullCaper {body.card}" + (" (defaults)" if body.use_defaults else "") + answers
    if kind == "complete_job":
        return f"CompleteJob {body.job} [{' '.join(body.team)}]"
    name = "".join(part.title() for part in kind.split("_"))
    return f"{name} {_fields(body)}".rstrip()


def render_event(event: pb.Event) -> str:
    kind = event.WhichOneof("kind") or "?"
    body: Any = getattr(event, kind) if kind != "?" else event
    name = "".join(part.title() for part in kind.split("_"))
    if kind == "deck_shuffled":
        return f"{name} {len(body.cards)} cards [{' '.join(body.cards)}]"
    if kind == "isk_stolen":
        src = "coffers" if body.from_coffers else f"seat {body.victim}"
        return f"{name} seat {body.seat} takes {body.amount} from {src}"
    return f"{name} {_fields(body)}".rstrip()
