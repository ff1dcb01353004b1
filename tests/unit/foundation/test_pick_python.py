"""tools/pick_python.py: which interpreter `make` builds .venv on."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("pick_python", ROOT / "tools" / "pick_python.py")
assert _spec is not None and _spec.loader is not None
pick = importlib.util.module_from_spec(_spec)
sys.modules["pick_python"] = pick  # dataclasses look their module up
_spec.loader.exec_module(pick)

VERSION = f"{sys.version_info[0]}.{sys.version_info[1]}"


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


def test_the_least_cpu_time_wins_and_untimed_candidates_never_do() -> None:
    a, b, c = (pick.Candidate(f"/x/{n}", VERSION) for n in "abc")
    assert pick.fastest([(a, 0.010), (b, 0.006), (c, None)]) == b
    assert pick.fastest([(a, None), (b, 0.009)]) == b
    assert pick.fastest([(a, 0.007), (b, 0.007)]) == a  # a tie keeps PATH order
    assert pick.fastest([(a, None), (b, None)]) == a
    assert pick.fastest([]) is None


def test_every_directory_of_path_is_searched_in_order(tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    x = _script(second / f"python{VERSION}", "exit 0")
    y = _script(first / "python3", "exit 0")
    (first / f"python{VERSION}").write_text("not executable")
    found = pick.on_path(pick.names_for(VERSION), os.pathsep.join([str(first), str(second)]))
    assert found == [str(y), str(x)]


def test_candidates_are_real_interpreters_of_this_version_once_each(tmp_path: Path) -> None:
    broken = _script(tmp_path / "broken", "exit 1")
    other = _script(tmp_path / "other", f"echo {tmp_path / 'other'}; echo 2.7")
    shim = _script(tmp_path / "shim", f'exec "{sys.executable}" "$@"')  # a pyenv-style shim
    found = pick.candidates(VERSION, [str(broken), str(other), sys.executable, str(shim)])
    assert found == [pick.Candidate(os.path.realpath(sys.executable), VERSION)]


def test_a_candidate_is_timed_by_running_the_workload() -> None:
    seconds = pick.cpu_seconds(pick.Candidate(sys.executable, VERSION))
    assert seconds is not None and 0 < seconds < 10
    assert pick.cpu_seconds(pick.Candidate(str(ROOT / "no-such-python"), VERSION)) is None


def test_the_script_prints_an_interpreter_of_its_own_version() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "pick_python.py")], capture_output=True,
                         text=True, check=True).stdout.strip()
    version = subprocess.run([out, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version == VERSION
