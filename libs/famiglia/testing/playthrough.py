"""Golden playthroughs (OpenSpiel style): a header, then per step the command, the events
with their visibility, each seat's rendered view (first steps and every tenth) and who is pending.

    python -m famiglia.testing.playthrough new goodcritters --seats 5 --seed 7   # write a new file
    python -m famiglia.testing.playthrough regen [--game G]                      # rewrite from their commands

Every command is stored (as proto text), so a file regenerates from its own commands;
tests/golden/test_golden.py compares the regenerated text line by line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from google.protobuf import text_format

from famiglia.engine import Engine, MatchConfig, Rng, fold
from famiglia.engine.protocol import Command
from famiglia.engine.registry import default_registry
from famiglia.testing.random_play import play_random

GOLDEN_ROOT = Path(__file__).resolve().parents[3] / "tests" / "golden"
DETAIL_FIRST = 3
DETAIL_EVERY = 10


def _vis(engine: Engine, event) -> str:
    v = engine.visibility(event)
    if v.kind.name == "PRIVATE":
        return "private:" + ",".join(str(s) for s in sorted(v.seats))
    return v.kind.name.lower()


def render(engine: Engine, seats: int, seed: int, options: dict[str, str],
           commands: list[tuple[int, Command]]) -> list[str]:
    """The whole playthrough text for these commands."""
    lines = [
        f"game: {engine.info.game_id}",
        f"seats: {seats}",
        f"seed: {seed}",
        f"options: {json.dumps(options, sort_keys=True)}",
        "",
        "== setup",
    ]
    setup = engine.setup(MatchConfig(seats=seats, options=options), seed)
    for e in setup:
        lines.append(f"  event [{_vis(engine, e)}] {engine.render_event(e)}")
    state = fold(engine, setup)
    version = len(setup) + 1
    acted = {s: 0 for s in range(seats)}
    for n, (seat, cmd) in enumerate(commands, start=1):
        lines.append("")
        lines.append(f"== step {n} seat {seat}: {engine.render_command(cmd)}")
        lines.append("  command: " + text_format.MessageToString(cmd, as_one_line=True))
        events = engine.decide(state, seat, cmd, Rng.derive(seed, version))
        for e in events:
            lines.append(f"  event [{_vis(engine, e)}] {engine.render_event(e)}")
        state = fold(engine, events, state)
        version += len(events)
        acted[seat] += 1
        detail = acted[seat] <= DETAIL_FIRST or n % DETAIL_EVERY == 0
        pend = ", ".join(f"{p.seat}:{p.kind.name.lower()}{'/' + p.label if p.label else ''}"
                         for p in engine.pending(state))
        lines.append(f"  pending: {pend or '-'}")
        if detail:
            for viewer in range(seats):
                view = engine.view(state, viewer)
                lines.append(f"  view {viewer}: " + text_format.MessageToString(view, as_one_line=True))
    lines.append("")
    result = engine.result(state)
    if result is None:
        lines.append("== not over")
    else:
        lines.append("== result")
        for s in sorted(result.seats, key=lambda s: s.seat):
            lines.append(f"  seat {s.seat}: score {s.score:g} rank {s.rank}")
        for k, v in sorted(result.outcome.items()):
            lines.append(f"  {k}: {v}")
    return lines


def parse(path: Path, engine_for) -> tuple[Engine, int, int, dict[str, str], list[tuple[int, Command]]]:
    header: dict[str, str] = {}
    commands: list[tuple[int, Command]] = []
    engine = None
    seat = -1
    for line in path.read_text().splitlines():
        if engine is None and ": " in line and not line.startswith("=="):
            k, v = line.split(": ", 1)
            header[k] = v
            if k == "options":
                engine = engine_for(header["game"])
            continue
        if line.startswith("== step "):
            seat = int(line.split(" seat ", 1)[1].split(":", 1)[0])
        elif line.startswith("  command: "):
            assert engine is not None
            cmd = engine.info.command_type()
            text_format.Parse(line[len("  command: "):], cmd)
            commands.append((seat, cmd))
    assert engine is not None, f"{path}: no header"
    return engine, int(header["seats"]), int(header["seed"]), json.loads(header["options"]), commands


def main(argv: list[str] | None = None) -> int:
    registry = default_registry()
    parser = argparse.ArgumentParser(prog="playthrough")
    sub = parser.add_subparsers(dest="cmd", required=True)
    new = sub.add_parser("new")
    new.add_argument("game")
    new.add_argument("--seats", type=int, required=True)
    new.add_argument("--seed", type=int, required=True)
    new.add_argument("--option", action="append", default=[], help="key=value")
    new.add_argument("--name", default=None)
    regen = sub.add_parser("regen")
    regen.add_argument("--game", default="", help="only this game's playthroughs")
    args = parser.parse_args(argv)
    if args.cmd == "new":
        engine = registry.get(args.game)
        options = dict(o.split("=", 1) for o in args.option)
        play = play_random(engine, args.seats, args.seed, options)
        commands = [(s.seat, s.command) for s in play.steps]
        name = args.name or f"{args.seats}p_seed{args.seed}"
        out = GOLDEN_ROOT / args.game / f"{name}.txt"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(render(engine, args.seats, args.seed, options, commands)) + "\n")
        print(f"wrote {out.relative_to(GOLDEN_ROOT.parent.parent)} ({len(commands)} commands)")
        return 0
    if args.game and args.game not in registry:  # `make golden GAME=typo` regenerated nothing, quietly
        parser.error(f"no game {args.game!r}: one of {', '.join(registry)}")
    pattern = f"{args.game}/*.txt" if args.game else "*/*.txt"
    for path in sorted(GOLDEN_ROOT.glob(pattern)):
        engine, seats, seed, options, commands = parse(path, registry.get)
        path.write_text("\n".join(render(engine, seats, seed, options, commands)) + "\n")
        print(f"regenerated {path.relative_to(GOLDEN_ROOT.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
