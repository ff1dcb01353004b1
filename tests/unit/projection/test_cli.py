"""`famiglia projection ...` hands rebuild, migrate and diverged to the service's own command."""

from __future__ import annotations

import subprocess
import sys

import pytest

from famiglia.cli import main as cli


@pytest.mark.parametrize(("argv", "expected"), [
    (["projection", "rebuild"], ["services.projection", "rebuild"]),
    (["projection", "migrate"], ["services.projection", "migrate"]),
    (["projection", "diverged"], ["services.projection", "diverged"]),
])
def test_rebuild_and_migrate_run_the_service_command(monkeypatch: pytest.MonkeyPatch, argv: list[str],
                                                     expected: list[str]) -> None:
    calls: list[list[str]] = []

    class Child:
        def __init__(self, args: list[str]) -> None:
            calls.append(list(args))

        def wait(self) -> int:
            return 0

    monkeypatch.setattr(subprocess, "Popen", Child)
    assert cli.main(argv) == 0
    assert calls == [[sys.executable, "-m", *expected]]
