"""Generate Python code and mypy stubs from protos/ into libs/ (`make protos`).

With --check, generate into a temporary folder and fail if anything differs from
what is committed: the stale-protos test runs that.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROTOS = ROOT / "protos"
OUT = ROOT / "libs"


def proto_files() -> list[Path]:
    return sorted(PROTOS.rglob("*.proto"))


def generate(out: Path) -> list[Path]:
    """Run protoc on every proto; return the generated files, relative to `out`."""
    import grpc_tools
    from grpc_tools import protoc

    include = Path(grpc_tools.__file__).parent / "_proto"
    # protoc finds the mypy plugins on PATH: put this interpreter's scripts first.
    bindir = str(Path(sys.executable).parent)
    os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    files = [str(p.relative_to(PROTOS)) for p in proto_files()]
    args = [
        "protoc",
        f"-I{PROTOS}",
        f"-I{include}",
        f"--python_out={out}",
        f"--mypy_out=quiet:{out}",
        f"--grpc_python_out={out}",
        f"--mypy_grpc_out=quiet:{out}",
        *files,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    generated = []
    for path in sorted(out.rglob("*_pb2*.py*")):
        if "__pycache__" in path.parts or path.suffix not in (".py", ".pyi"):
            continue
        rel = path.relative_to(out)
        generated.append(rel)
    return generated


def generated_dirs(files: list[Path]) -> set[Path]:
    return {f.parent for f in files}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true", help="fail if committed code is stale")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_out = Path(tmp)
        files = generate(tmp_out)
        # Empty gRPC modules for protos without services are noise: drop them.
        files = [f for f in files if not _is_empty_grpc(tmp_out / f)]
        stale = []
        for rel in files:
            target = OUT / rel
            if not target.exists() or not _same(tmp_out / rel, target):
                stale.append(rel)
        committed = {p.relative_to(OUT) for p in OUT.rglob("*_pb2*.py*")
                     if "__pycache__" not in p.parts and p.suffix in (".py", ".pyi")}
        orphans = sorted(committed - set(files))
        if args.check:
            if stale or orphans:
                for rel in stale:
                    print(f"stale: libs/{rel}")
                for rel in orphans:
                    print(f"orphan: libs/{rel}")
                print("generated code is stale: run `make protos`")
                return 1
            return 0
        for rel in stale:
            (OUT / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tmp_out / rel, OUT / rel)
        for rel in orphans:
            (OUT / rel).unlink()
        for d in generated_dirs(files):
            # Generated packages need __init__.py up to libs/famiglia.
            cur = OUT / d
            while cur != OUT and cur.is_relative_to(OUT / "famiglia"):
                init = cur / "__init__.py"
                if not init.exists():
                    init.write_text("")
                cur = cur.parent
        print(f"{len(stale)} generated file(s) updated, {len(orphans)} removed, {len(files)} in all")
    return 0


#: The grpcio-tools release that generated a gRPC module, stamped in it: not the schema. The
#: dependencies name lowest versions only, so a fresh install may bring a newer generator.
_STAMP = re.compile(r"^GRPC_GENERATED_VERSION = .*$", re.MULTILINE)


def _same(generated: Path, committed: Path) -> bool:
    """Whether the committed file is what the protos give now, whichever grpcio-tools release
    stamped it (a newer stamp would only raise the lowest grpcio the modules import with)."""
    if filecmp.cmp(generated, committed, shallow=False):
        return True
    if not generated.name.endswith("_grpc.py"):
        return False
    return _STAMP.sub("", generated.read_text()) == _STAMP.sub("", committed.read_text())


def _is_empty_grpc(path: Path) -> bool:
    if not path.name.endswith("_pb2_grpc.py") and not path.name.endswith("_pb2_grpc.pyi"):
        return False
    text = path.read_text()
    return "class " not in text and "def add_" not in text


if __name__ == "__main__":
    sys.exit(main())
