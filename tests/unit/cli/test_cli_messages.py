"""`famiglia ...`: bad input or an unreachable dependency is one clear line, not a traceback."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from famiglia.localstack.redis_server import free_port

ROOT = Path(__file__).resolve().parents[3]


def test_projection_rebuild_with_redis_down_is_a_message_not_a_traceback(tmp_path: Path) -> None:
    """`famiglia projection rebuild` runs `python -m services.projection rebuild`, which lets
    redis.exceptions.ConnectionError escape: two chained tracebacks for "is the stack up?"."""
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'libs'}{os.pathsep}{ROOT}",
               FAMIGLIA_VAR_DIR=str(tmp_path), FAMIGLIA_SECRET="x",
               FAMIGLIA_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",
               FAMIGLIA_DATABASE_URL=f"sqlite:///{tmp_path / 'rm.db'}", OTEL_SDK_DISABLED="true")
    done = subprocess.run([sys.executable, "-m", "famiglia.cli.main", "projection", "rebuild"], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "Traceback" not in done.stdout + done.stderr, (done.stdout + done.stderr)[-1500:]


def test_play_with_zero_workers_is_refused_as_bad_input(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`famiglia play GAME --workers 0` reaches ThreadPoolExecutor(max_workers=0): a ValueError
    traceback after the matches were planned, instead of argparse's usage error."""
    from famiglia.cli import main as cli

    monkeypatch.setenv("FAMIGLIA_VAR_DIR", str(tmp_path))
    monkeypatch.setenv("FAMIGLIA_SECRET", "x")

    class _Game:
        game_id, min_players, max_players = "goodcritters", 4, 8

    class _Client:
        def __init__(self, *_a, **_k) -> None: ...
        def wait_ready(self, *_a, **_k) -> None: ...
        def list_games(self):  # type: ignore[no-untyped-def]
            return [_Game()]

    monkeypatch.setattr(cli, "GameClient", _Client)
    monkeypatch.setattr(cli, "play_match", lambda *a, **k: None)
    try:
        code = cli.main(["play", "goodcritters", "--workers", "0", "--matches", "1", "--address", "x:1"])
    except SystemExit as exc:  # argparse's refusal: fine
        code = exc.code
    assert code == 2


def test_replay_export_to_an_unwritable_path_is_a_message_not_a_traceback(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`famiglia replay export MATCH -o no/such/dir/m.json`: the export is fetched, then
    Path.write_bytes raises FileNotFoundError, which nothing in the CLI catches."""
    from famiglia.cli import replay as cli_replay
    from famiglia.cli.main import main

    monkeypatch.setenv("FAMIGLIA_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("FAMIGLIA_SECRET", "x")

    class _Client:
        def export(self, match_id: str, *, binary: bool = False):  # type: ignore[no-untyped-def]
            return argparse.Namespace(file=b"{}", file_name="g-m.famiglia.json", events=1, commands=0)

    monkeypatch.setattr(cli_replay, "_client", lambda args: _Client())
    target = tmp_path / "no" / "such" / "dir" / "m.json"
    try:
        code = main(["replay", "export", "m123", "-o", str(target)])
    except SystemExit as exc:
        code = exc.code
    assert code not in (0, None)


@pytest.mark.parametrize("matches", ["0", "-1", "x"])
def test_play_with_no_matches_is_refused_not_an_empty_table(matches: str, monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    """`famiglia play GAME --matches 0` (or a negative count) planned nothing, printed an empty
    "Matches played" table and exited 0, as if the server had played what was asked."""
    from famiglia.cli import main as cli

    monkeypatch.setenv("FAMIGLIA_VAR_DIR", str(tmp_path))
    monkeypatch.setenv("FAMIGLIA_SECRET", "x")

    class _Game:
        game_id, min_players, max_players = "grifters", 2, 4

    class _Client:
        def __init__(self, *_a, **_k) -> None: ...
        def wait_ready(self, *_a, **_k) -> None: ...
        def list_games(self):  # type: ignore[no-untyped-def]
            return [_Game()]

    monkeypatch.setattr(cli, "GameClient", _Client)
    try:
        code = cli.main(["play", "grifters", "--matches", matches, "--address", "x:1"])
    except SystemExit as exc:  # argparse's refusal
        code = exc.code
    assert code == 2
