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


def test_a_newer_grpcio_tools_stamp_alone_is_not_stale(tmp_path: Path) -> None:
    """A fresh install may bring a newer grpcio-tools than the one that generated the committed
    modules; only its version stamp differs then, not the schema."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_protos", ROOT / "tools" / "gen_protos.py")
    assert spec is not None and spec.loader is not None
    gen_protos = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_protos)
    body = "import grpc\n\nGRPC_GENERATED_VERSION = '{}'\nGRPC_VERSION = grpc.__version__\n\nclass GameServiceStub:\n{}"
    committed, newer, changed = (tmp_path / name for name in ("a_pb2_grpc.py", "b_pb2_grpc.py", "c_pb2_grpc.py"))
    committed.write_text(body.format("1.85.1", "    pass\n"))
    newer.write_text(body.format("1.85.4", "    pass\n"))
    changed.write_text(body.format("1.85.1", "    x = 1\n"))
    assert gen_protos._same(newer, committed)
    assert not gen_protos._same(changed, committed)


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
