"""`make run` whose stack loses a process while the tournament plays: it says so and stops,
instead of following matches that will never finish."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rich.console import Console

from famiglia.cli import tournament as cli
from famiglia.localstack.stack import Stack, default_services
from famiglia.v1 import tournament_service_pb2 as pb


class _StuckClient:
    """A tournament with matches in play that never finish (nobody plays them)."""

    def get(self, tournament_id: str, include_matches: bool = False) -> pb.Tournament:
        return pb.Tournament(tournament_id=tournament_id, status=pb.TOURNAMENT_RUNNING, planned=24, finished=3,
                             moves=1185, games=[pb.GameProgress(game_id="grifters", planned=6,
                                                                          started=3, finished=1)])


def test_following_a_tournament_stops_when_the_stack_cannot_finish_it() -> None:
    """With the bots worker killed (OOM, kill -9), the bars of `make run` stood still for ever:
    `follow` had no way out but a finished or cancelled tournament."""
    ended: list[BaseException] = []

    def run() -> None:
        try:
            cli.follow(_StuckClient(), "t1", Console(file=open("/dev/null", "w")), poll=0.01,  # noqa: SIM115
                       check=lambda: "bots-worker of the embedded stack stopped", check_every=0.05)
        except BaseException as exc:  # noqa: BLE001 - what it ended with is the point
            ended.append(exc)

    follower = threading.Thread(target=run, daemon=True)
    follower.start()
    follower.join(timeout=30)
    assert not follower.is_alive(), "still following a tournament that cannot finish"
    assert isinstance(ended[0], SystemExit) and "bots-worker" in str(ended[0].code)


def test_the_stack_problem_names_the_process_that_is_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAMIGLIA_VAR_DIR", str(tmp_path / "var"))
    names = ["redis", *(spec.name for spec in default_services())]
    procs = {}
    try:
        for name in names:
            if name == "bots-worker":
                continue  # killed
            marker = next((spec.argv[2] for spec in default_services() if spec.name == name), "")
            procs[name] = subprocess.Popen(["redis-server" if name == "redis" else sys.executable, "-c",
                                            "import time; time.sleep(60)", marker], executable=sys.executable)
        stack = Stack(var=tmp_path / "var", redis_port=1)
        stack.var.mkdir()
        stack._save({name: p.pid for name, p in procs.items()})
        deadline = time.monotonic() + 30  # a child just forked shows its parent's command line until it execs
        while set(stack.running()) != set(procs) and time.monotonic() < deadline:
            time.sleep(0.01)
        problem = cli._stack_problem()
        assert problem is not None and "bots-worker" in problem and "bots-worker.log" in problem
        assert not any(f"{name}," in problem or f"{name} " in problem for name in procs)
        stack._save({name: p.pid for name, p in procs.items()} | {"bots-worker": procs["redis"].pid})
        time.sleep(0.05)
        assert "bots-worker" in (cli._stack_problem() or "")  # a pid that is not the worker's is no worker
    finally:
        for p in procs.values():
            p.kill()
            p.wait()
