"""`make run` (famiglia.cli.main run): a stack that fails to come up is taken down again."""

from __future__ import annotations

import argparse

import pytest


class _Stack:
    downs = 0
    already: dict[str, int] = {}

    def running(self) -> dict[str, int]:
        return dict(self.already)

    def up(self, *, log=print) -> None:  # type: ignore[no-untyped-def]
        if not self.already:
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


def test_run_leaves_up_a_stack_someone_started(monkeypatch: pytest.MonkeyPatch) -> None:
    """`make up`, then `make run`: the run plays on that stack and leaves it running, and its
    closing hint (run_main_job's, by `keep_up`) no longer says to `make up` a stack that is up."""
    from famiglia.cli import main

    _Stack.downs, _Stack.already = 0, {"redis": 1, "command": 2}
    monkeypatch.setattr(main, "Stack", _Stack)
    seen: list[argparse.Namespace] = []
    monkeypatch.setattr(main.importlib, "import_module", lambda name: argparse.Namespace(
        run_main_job=lambda args, console: seen.append(args) or 0))
    try:
        assert main.cmd_run(argparse.Namespace(keep_up=False)) == 0
    finally:
        _Stack.already = {}
    assert _Stack.downs == 0
    assert [args.keep_up for args in seen] == [True]


def test_a_refusal_is_one_line_with_its_code_not_a_traceback(capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import grpc

    from famiglia.cli import main

    class Refused(grpc.RpcError):
        def code(self) -> grpc.StatusCode:
            return grpc.StatusCode.NOT_FOUND

        def details(self) -> str:
            return "unknown_tournament: no tournament '[/x]tnosuch'"

        def trailing_metadata(self):  # type: ignore[no-untyped-def]
            return (("famiglia-code", "unknown_tournament"),)

    def refuse(args):  # type: ignore[no-untyped-def]
        raise Refused()

    monkeypatch.setattr(main, "cmd_status", refuse)
    assert main.main(["status"]) == 2
    out = capsys.readouterr().out
    assert "NOT_FOUND" in out and "unknown_tournament" in out and "Traceback" not in out
    assert "[/x]tnosuch" in out  # what the user typed, shown as typed (not read as markup)
