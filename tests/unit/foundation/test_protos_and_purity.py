"""Structural guarantees: generated code is fresh, engines stay pure."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FORBIDDEN = {"redis", "grpc", "celery", "sqlmodel", "sqlalchemy", "structlog", "opentelemetry", "time", "socket",
             "threading", "subprocess", "os", "requests", "urllib"}


def test_generated_code_is_not_stale() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_protos.py"), "--check"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rules_engines_import_no_io_framework_and_no_clock() -> None:
    offenders = []
    for path in sorted((ROOT / "libs" / "famiglia" / "rules").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                if name.split(".")[0] in FORBIDDEN:
                    offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, offenders


def test_rules_engines_never_call_the_random_module_functions() -> None:
    offenders = []
    for path in sorted((ROOT / "libs" / "famiglia" / "rules").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name == "random" for a in node.names):
                offenders.append(f"{path.relative_to(ROOT)} imports random")
            if isinstance(node, ast.ImportFrom) and node.module == "random":
                offenders.append(f"{path.relative_to(ROOT)} imports from random")
    assert not offenders, offenders
