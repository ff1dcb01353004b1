"""`famiglia replay ...` — look at any match as of any event, export it, verify it.

    famiglia replay EVENT_ID [--token T] [--full]   the state there; n/p step, q quits
    famiglia replay events MATCH_ID                 event ids, types and seqs
    famiglia replay export MATCH_ID -o FILE         the whole match as a file
    famiglia replay verify FILE                     re-run it through today's engines
    famiglia replay import FILE [--as MATCH_ID] [--allow-unverified]
                                                    store an export here (operator)

`verify` needs no server: it reads the file and runs the engines in process,
so a file checked on a laptop means the same as one checked by the service.
`import` is an operator action: it sends an operator token minted from the
deployment's secret (FAMIGLIA_SECRET, or the embedded stack's var/secret;
signed with FAMIGLIA_SECRET_ACCEPTED too when it is set, a secret rollover), or
the one given with --operator-token.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import grpc
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from famiglia.config import Settings
from famiglia.v1 import replay_service_pb2 as pb

console = Console()
SCOPES = {pb.VIEW_SCOPE_SPECTATOR: "spectator", pb.VIEW_SCOPE_SEAT: "seat", pb.VIEW_SCOPE_FULL: "full"}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "replay", help="replay, list, export, verify or import a match",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target", help="an EVENT_ID, or one of: verify, export, events, import")
    parser.add_argument("arg", nargs="?", default="", help="FILE for verify/import, MATCH_ID for export/events")
    parser.add_argument("-o", "--output", default="",
                        help="export: where to write the file (default: GAME-MATCH.famiglia.json here)")
    parser.add_argument("--binary", action="store_true", help="export: protobuf binary instead of JSON")
    parser.add_argument("--token", default="", help="a seat token: see the match as that seat")
    parser.add_argument("--full", action="store_true", help="everything (once the match is over)")
    parser.add_argument("--address", default="", help="replay service (default: FAMIGLIA_REPLAY_ADDR; grpcs://: TLS)")
    parser.add_argument("--as", dest="new_match_id", default="", help="import: store under this match id")
    parser.add_argument("--allow-unverified", action="store_true",
                        help="import: store even if today's engine does not reproduce it")
    parser.add_argument("--operator-token", default="",
                        help="import: an operator token (default: one minted from FAMIGLIA_SECRET)")
    parser.set_defaults(func=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    if args.target == "verify":
        return verify_file(Path(_need(args.arg, "verify FILE")))
    try:
        if args.target == "export":
            return export_match(_client(args), _need(args.arg, "export MATCH_ID"), args.output, binary=args.binary)
        if args.target == "import":
            return import_file(_client(args), Path(_need(args.arg, "import FILE")),
                               token=args.operator_token or None, new_match_id=args.new_match_id,
                               allow_unverified=args.allow_unverified)
        if args.target == "events":
            return list_events(_client(args), _need(args.arg, "events MATCH_ID"), token=args.token or None)
        return step_through(_client(args), args.target, token=args.token or None, full=args.full)
    except grpc.RpcError as exc:
        console.print(f"[red]{exc.code().name}[/]: {escape(exc.details() or '')}")  # type: ignore[attr-defined]
        return 2


def _need(value: str, usage: str) -> str:
    """A missing FILE or MATCH_ID is bad input (2, as argparse's own): SystemExit's message left
    with 1, which `verify` gives to a divergence and `import` to a match stored unverified."""
    if not value:
        print(f"usage: famiglia replay {usage}", file=sys.stderr)
        raise SystemExit(2)
    return value


def _client(args: argparse.Namespace):
    from famiglia.replay.client import ReplayClient

    return ReplayClient(args.address or Settings.from_env().replay_addr)


# -- verify ----------------------------------------------------------------------------------
def _registry():
    from famiglia.engine.registry import default_registry

    return default_registry()


def verify_file(path: Path, *, registry=None, out: Console | None = None) -> int:
    """0 when every event is reproduced, 1 at a divergence, 2 for an unreadable file."""
    from famiglia.replay.export import BadExport, load
    from famiglia.replay.verify import verify_export

    out = out or console
    try:
        export = load(path.read_bytes())
    except (OSError, BadExport) as exc:
        out.print(f"[red]cannot read {escape(str(path))}[/]: {escape(str(exc))}")
        return 2
    report = verify_export(registry or _registry(), export)
    out.print(report.describe(), markup=False, highlight=False)
    return 0 if report.ok else 1


# -- export ----------------------------------------------------------------------------------
def export_match(client, match_id: str, output: str, *, binary: bool = False) -> int:
    answer = client.export(match_id, binary=binary)
    path = Path(output or _here(answer.file_name, match_id))
    try:
        path.write_bytes(answer.file)
    except OSError as exc:
        console.print(f"[red]cannot write {escape(str(path))}[/]: {escape(str(exc.strerror or exc))}")
        return 2
    console.print(f"wrote {escape(str(path))}: {answer.events} events, {answer.commands} commands")
    return 0


def _here(file_name: str, match_id: str) -> str:
    """The server's name for the file, in this folder: its last part only, whatever folders it
    names (a hostile server's `../../.bashrc` is `.bashrc` here), or one of ours if none is left."""
    name = Path(file_name).name
    if name in ("", ".", ".."):
        name = "".join(c if c.isalnum() or c in "._:-" else "_" for c in match_id).lstrip(".") + ".famiglia.json"
    return name


# -- import ----------------------------------------------------------------------------------
def import_file(client, path: Path, *, token: str | None = None, new_match_id: str = "",
                allow_unverified: bool = False, secret: str = "", out: Console | None = None) -> int:
    """ImportMatch with an operator token (minted from `secret` or the configured one unless
    given); 0 when stored and verified, 1 when stored unverified, 2 when refused or unreadable."""
    from famiglia.replay.client import operator_token
    from famiglia.replay.export import FILE_MAX_BYTES

    out = out or console
    try:
        if path.stat().st_size > FILE_MAX_BYTES:  # the service would refuse it (file_too_large): not sent
            out.print(f"[red]{escape(str(path))} is past the {FILE_MAX_BYTES // (1024 * 1024)} MiB an import "
                      "takes[/]: export the match again with --binary (smaller than its JSON)")
            return 2
        data = path.read_bytes()
    except OSError as exc:
        out.print(f"[red]cannot read {escape(str(path))}[/]: {escape(str(exc))}")
        return 2
    if not token and secret:
        token = operator_token(secret)
    elif not token:
        settings = Settings.from_env()
        token = operator_token(settings.secret, accepted_secret=settings.accepted_secret)
    answer = client.import_file(data, token=token, new_match_id=new_match_id, allow_unverified=allow_unverified)
    verified = answer.verification.ok
    out.print(f"stored match {escape(answer.match_id)} ({answer.version} events, "
              f"{'verified' if verified else 'NOT verified'})", highlight=False)
    return 0 if verified else 1


def list_events(client, match_id: str, *, token: str | None = None) -> int:
    for info in client.events(match_id, token=token):
        kind = "(hidden)" if info.hidden else info.type
        console.print(f"{info.seq:>6}  {escape(info.event_id)}  seat {info.seat:>2}  {escape(kind)}", highlight=False)
    return 0


# -- stepping ----------------------------------------------------------------------------------
def step_through(client, event_id: str, *, token: str | None = None, full: bool = False,
                 ask: Callable[[str], str] = input, out: Console | None = None) -> int:
    """Show the state at `event_id`; n / p move one event forward / back, q quits."""
    out = out or console
    at = client.state_at(event_id, token=token, full=full)
    events = client.events(at.match_id, token=token)
    ids = [e.event_id for e in events]  # "" for an event hidden from the asker: no state to ask for
    index = next((i for i, e in enumerate(events) if e.seq == at.seq), 0)
    while True:
        info = events[index]
        title = (f"{at.game_id} {at.match_id} · event {at.seq}/{at.last_seq} · "
                 f"{'(hidden)' if info.hidden else info.type} · {SCOPES.get(at.scope, '?')}"
                 + (" · game over" if at.game_over else ""))
        to_act = ", ".join(f"seat {p.seat} {p.label}".strip() for p in at.to_act)
        body = (at.text or "(nothing to show)") + (f"\n\nto act: {to_act}" if to_act else "")
        out.print(Panel(Text(body), title=escape(title), title_align="left"))  # the game's words, as they are
        try:
            key = ask("n(ext) p(rev) q(uit) > ").strip().lower()
        except EOFError:
            return 0
        if key in ("q", "quit"):
            return 0
        if key in ("n", "next", ""):
            later = [i for i in range(index + 1, len(ids)) if ids[i]]
            if not later:
                out.print("(last event)")
                continue
            index = later[0]
        elif key in ("p", "prev"):
            earlier = [i for i in range(index) if ids[i]]
            if not earlier:
                out.print("(first event)")
                continue
            index = earlier[-1]
        else:
            out.print("keys: n next, p previous, q quit")
            continue
        at = client.state_at(ids[index], token=token, full=full, match_id=at.match_id)
