"""`famiglia match ...` — operator actions on one match of the command service.

    famiglia match cancel MATCH_ID --reason TEXT [--request-id ID]   end it with no result

The operator token is minted from the deployment's secret (FAMIGLIA_SECRET, or the embedded
stack's `var/secret`), as `famiglia tournament` does.
"""

from __future__ import annotations

import argparse
import uuid

from rich.console import Console
from rich.markup import escape

from famiglia.auth import TokenSigner
from famiglia.client import GameClient
from famiglia.config import Settings

console = Console()


def cmd_cancel(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    # A request id of its own, printed: running the command again with it after a lost answer
    # is answered as the first call was, not refused as a cancel of a match already over.
    request_id = args.request_id or uuid.uuid4().hex
    token = TokenSigner(settings.secret).operator_token("cli", ttl_s=300)
    client = GameClient(args.address or settings.command_addr)
    try:
        done = client.cancel_match(args.match_id, args.reason, token=token, request_id=request_id)
    finally:
        client.close()
    again = " (already, by this request id)" if done.duplicate else ""
    console.print(f"{escape(args.match_id)}: cancelled at version {done.version}{again}; request id {request_id}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("match", help="operator actions on a match: cancel",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default="", help="command service (default: FAMIGLIA_COMMAND_ADDR; grpcs://: TLS)")
    sub = parser.add_subparsers(dest="match_cmd", required=True)
    cancel = sub.add_parser("cancel", help="end a match with no result (stuck, orphaned, stopped)")
    cancel.add_argument("match_id")
    cancel.add_argument("--reason", required=True, help="why: stored in the match and shown to every seat")
    cancel.add_argument("--request-id", default="", help="idempotency key, at most 120 characters (default: a new one, printed)")
    cancel.set_defaults(func=cmd_cancel)
