"""`make run` (famiglia.cli.main run): a stack that fails to come up is taken down again."""

from __future__ import annotations

import argparse

import pytest


class _Stack:
    downs = 0

    def up(self, *, log=print) -> None:  # type: ignore[no-untyped-def]
        raise SystemExit("port 50054 for projection is taken")

    def down(self, *, log=print) -> None:  # type: ignore[no-untyped-def]
        _Stack.downs += 1


@pytest.mark.parametrize(("keep_up", "downs"), [(False, 1), (True, 0)])
def test_a_stack_that_fails_to_start_does_not_leave_its_first_services_running(
        monkeypatch: pytest.MonkeyPatch, keep_up: bool, downs: int) -> None:
    from famiglia.cli import main

    _Stack.downs = 0
    monkeypatch.setattr(main, "Stack", _Stack)
    with pytest.raises(SystemExit, match="taken"):
        main.cmd_run(argparse.Namespace(keep_up=keep_up))
    assert _Stack.downs == downs
