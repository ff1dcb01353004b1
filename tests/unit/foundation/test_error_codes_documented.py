"""Every stable code a service can refuse with is in its page's error table, under its status.

A client developer handles the codes the docs' tables name. The first check of this read only
the command service's `InvalidArgument("...")` calls: the query service's `no_game_id` and
`bad_status`, the tournament service's `no_entrants`, `no_games` and `unknown_tournament`, the
replay service's codes and codes carried by the libraries' own exceptions (`BadTournament`,
`InvalidRequest`, `NotAllowed`, `Refused`) were named in no table, and matchmaking built
`ticket_{state}` in an f-string that could spell `ticket_missing`. The code is read as Python
(every call of an AppError kind or a carrier, wherever it is), and each page's tables as
markdown (a `status` column and a `code` column).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

#: The AppError kinds of famiglia.grpcutil.errors and the status each is sent as.
KINDS = {
    "InvalidArgument": "INVALID_ARGUMENT", "FailedPrecondition": "FAILED_PRECONDITION", "NotFound": "NOT_FOUND",
    "Unauthenticated": "UNAUTHENTICATED", "PermissionDenied": "PERMISSION_DENIED", "Aborted": "ABORTED",
    "AlreadyExists": "ALREADY_EXISTS", "Unavailable": "UNAVAILABLE", "OutOfRange": "OUT_OF_RANGE",
    "ResourceExhausted": "RESOURCE_EXHAUSTED",
}
#: The libraries' exceptions that carry a stable code to a service, which raises it (`exc.code`)
#: as this status. `Refused(..., precondition=True)` is FAILED_PRECONDITION.
CARRIERS = {
    "BadTournament": "INVALID_ARGUMENT",  # famiglia.bots.tournament, services/bots spec_from_request
    "InvalidRequest": "INVALID_ARGUMENT",  # famiglia.matchmaking.compat, MatchmakingApp.create_ticket
    "NotAllowed": "PERMISSION_DENIED",  # famiglia.replay.access, ReplayApp._access
    "Refused": "INVALID_ARGUMENT",  # famiglia.replay.admission, ReplayApp.import_file
}
#: `options_refusal` answers (code, message); matchmaking and the tournament service refuse with it.
OPTIONS_REFUSAL = "libs/famiglia/engine/protocol.py"

#: Where a client developer looks for each service's codes, and the code raising them.
PAGES = {
    "README.md": ["services/command", "libs/famiglia/grpcutil"],
    "docs/matchmaking.md": ["services/matchmaking", "libs/famiglia/matchmaking", OPTIONS_REFUSAL],
    "docs/replay.md": ["services/replay", "libs/famiglia/replay"],
    "docs/projection.md": ["services/projection"],
    "docs/bots.md": ["services/bots", "libs/famiglia/bots", OPTIONS_REFUSAL],
}
#: Refusals every service's RPC wrapper and operator check may send: README's table names them,
#: and any page may name them again.
SHARED = "libs/famiglia/grpcutil"

CODE = re.compile(r"[a-z][a-z0-9_]*")
STATUS = re.compile(r"`([A-Z][A-Z_]+)`")


def _name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _raised(path: Path) -> tuple[set[tuple[str, str]], list[str]]:
    """(code, status) pairs `path` refuses with, and the refusals whose code is not a literal
    (other than one passed on from a carrier, `exc.code`, or from options_refusal, `code`):
    those the tables cannot be checked for."""
    found: set[tuple[str, str]] = set()
    unreadable: list[str] = []
    rel = path.relative_to(ROOT).as_posix()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (_name(node) in KINDS or _name(node) in CARRIERS) and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                status = KINDS.get(_name(node)) or CARRIERS[_name(node)]
                if any(k.arg == "precondition" for k in node.keywords):
                    status = "FAILED_PRECONDITION"
                found.add((first.value, status))
            elif not (isinstance(first, ast.Attribute) and first.attr == "code"
                      or isinstance(first, ast.Name) and first.id == "code"):  # options_refusal's, passed on
                unreadable.append(f"{rel}:{node.lineno} {ast.unparse(first)}")
        elif rel == OPTIONS_REFUSAL and isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):
            first = node.value.elts[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and CODE.fullmatch(first.value):
                found.add((first.value, "INVALID_ARGUMENT"))
    return found, unreadable


def _sources(prefix: str) -> list[Path]:
    base = ROOT / prefix
    files = [base] if base.suffix == ".py" else sorted(base.rglob("*.py"))
    return [p for p in files if not re.search(r"_pb2(_grpc)?\.py$", p.name)]


def _raised_under(prefixes: list[str]) -> set[tuple[str, str]]:
    return {pair for prefix in prefixes for path in _sources(prefix) for pair in _raised(path)[0]}


def _tables(page: str) -> dict[str, set[str]]:
    """The codes each status names in the page's error tables (a header with a `status` and a
    `code...` column); a rule id (`GC-A03`) or a field name outside the code column is no code."""
    by_status: dict[str, set[str]] = defaultdict(set)
    lines = (ROOT / page).read_text().splitlines()
    for i, line in enumerate(lines):
        cells = [c.strip().lower() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or "status" not in cells:
            continue
        code_column = next((k for k, c in enumerate(cells) if c.startswith("code")), None)
        if code_column is None:
            continue
        status_column = cells.index("status")
        for row in lines[i + 2:]:
            if not row.startswith("|"):
                break
            row_cells = row.strip().strip("|").split("|")
            statuses = STATUS.findall(row_cells[status_column])
            codes = {c for c in re.findall(r"`([^`]+)`", row_cells[code_column]) if CODE.fullmatch(c)}
            for status in statuses:
                by_status[status] |= codes
    return by_status


def test_every_refusal_names_its_code_literally() -> None:
    """A code built at run time (f"ticket_{state}") is one no table can be checked for."""
    unreadable = [u for path in _sources("libs") + _sources("services") for u in _raised(path)[1]]
    assert not unreadable, f"refusals whose code is not a literal: {unreadable}"


def test_every_file_that_refuses_is_covered_by_a_page() -> None:
    covered = {p for prefixes in PAGES.values() for prefix in prefixes for p in _sources(prefix)}
    refusing = {p for p in _sources("libs") + _sources("services") if _raised(p)[0]}
    assert len(refusing) >= 10, refusing  # the scan still finds the services' refusals
    missing = sorted(p.relative_to(ROOT).as_posix() for p in refusing - covered)
    assert not missing, f"these refuse with codes no page's error table is checked against: {missing}"


def test_every_code_a_service_refuses_with_is_in_its_pages_table_under_its_status() -> None:
    shared = _raised_under([SHARED])
    assert {("undecodable_request", "INVALID_ARGUMENT"), ("operator_only", "PERMISSION_DENIED")} <= shared
    for page, prefixes in PAGES.items():
        tables = _tables(page)
        raised = _raised_under(prefixes)
        assert raised, page  # the scan still finds them
        missing = sorted(f"{status} {code}" for code, status in raised if code not in tables.get(status, ()))
        assert not missing, f"{page}'s error table does not name {missing}"


def test_every_code_a_table_names_is_one_its_service_refuses_with() -> None:
    shared = _raised_under([SHARED])
    for page, prefixes in PAGES.items():
        tables = _tables(page)
        assert tables, f"{page} has no error table (a `status` and a `code` column)"
        raised = _raised_under(prefixes) | shared
        stale = sorted(f"{status} {code}" for status, codes in tables.items() for code in codes
                       if (code, status) not in raised)
        assert not stale, f"{page}'s error table names {stale}, which its service never refuses with"
