"""`make status` tells the truth about a stack that is only partly running."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from famiglia.localstack.stack import Stack, default_services


def test_status_names_the_services_of_a_half_up_stack_that_are_not_running(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """With the command service crashed, `status` listed the other processes and their pids,
    exited 0 and never said the command service was missing: it read as a stack that is up."""
    from famiglia.cli.main import main

    monkeypatch.setenv("FAMIGLIA_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("FAMIGLIA_REDIS_PORT", "1")
    redis = subprocess.Popen(["redis-server", "-c", "import time; time.sleep(60)"], executable=sys.executable)
    try:
        stack = Stack(var=tmp_path / "var", redis_port=1)
        stack.var.mkdir()
        stack._save({"redis": redis.pid, "command": 2 ** 22 + 12345})  # the command service: crashed
        code = main(["status"])
        out = capsys.readouterr().out
    finally:
        redis.kill()
        redis.wait()
    assert f"pid {redis.pid}" in out
    missing = [spec.name for spec in default_services()]
    for name in missing:
        assert any(line.split()[:1] == [name] and "not running" in line for line in out.splitlines()), out
    assert code != 0


def test_status_of_a_stack_whose_processes_are_all_gone_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from famiglia.cli.main import main

    monkeypatch.setenv("FAMIGLIA_VAR_DIR", str(tmp_path / "var"))
    stack = Stack(var=tmp_path / "var", redis_port=1)
    stack.var.mkdir()
    stack._save({"redis": 2 ** 22 + 12345})  # a stack killed with kill -9: its stack.json stays
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "not running" in out and "none recorded" not in out


@pytest.mark.parametrize("command", ["status", "down", "up"])
@pytest.mark.parametrize("text", ["", "{\"pids\": {\"redis\": 12", "[]", "{\"pids\": [1]}"])
def test_an_unreadable_stack_state_is_a_line_naming_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, text: str) -> None:
    """var/stack.json emptied or cut short (a full disk, an editor, a copy of var/): `status`,
    `down`, `up` and `run` each ended in a JSONDecodeError (or AttributeError) traceback."""
    from famiglia.cli.main import main

    monkeypatch.setenv("FAMIGLIA_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("FAMIGLIA_REDIS_PORT", "1")
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "stack.json").write_text(text)
    with pytest.raises(SystemExit) as stopped:
        main([command])
    assert "stack.json" in str(stopped.value.code)


def test_status_with_an_address_set_wrong_since_up_still_shows_the_stack(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`status` read every service's address to tell the stack's processes from other programs
    and to list them: a typo in one showed nothing of a stack that was up, only the typo."""
    from famiglia.cli.main import main

    monkeypatch.setenv("FAMIGLIA_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("FAMIGLIA_BOTS_ADDR", "localhost:5005x")
    redis = subprocess.Popen(["redis-server", "-c", "import time; time.sleep(60)"], executable=sys.executable)
    try:
        stack = Stack(var=tmp_path / "var", redis_port=1)
        stack.var.mkdir()
        stack._save({"redis": redis.pid})
        main(["status"])
        out = capsys.readouterr().out
    finally:
        redis.kill()
        redis.wait()
    assert f"pid {redis.pid}" in out
    assert len([line for line in out.splitlines() if "FAMIGLIA_BOTS_ADDR='localhost:5005x'" in line]) == 1, out
