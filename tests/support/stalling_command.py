"""`python -m tests.support.stalling_command`: the command service as `python -m services.command`
runs it, whose only game is Stalling Card (famiglia.testgames.stalling): every `decide` loops for
STALLING_CARD_S seconds (an hour by default: for ever, as far as a test can tell), as a runaway
engine would. For the end-to-end tests of the stuck-call watchdog.

With STALLING_MARKS (a directory), it says where its calls are by files there, for a test to wait
on rather than guess from a call's time: `decide` once a `decide` began to stall (the command holds
its match's lock), `view` each time a GetView's handler runs (its call is under way, and waits for
that lock). A client's deadline says neither: on a loaded host it passes before the command reaches the
engine, or before a handler takes the view (gRPC then never runs it)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import services.command.__main__ as command
from famiglia.testgames.stalling import StallingCard, stalling_registry


def _marked(engine: StallingCard, app: Any, marks: Path) -> Any:
    """`app`, its engine's stall and each view it begins marked in `marks`."""

    def stalling() -> None:
        engine.entered.wait()
        (marks / "decide").touch()

    threading.Thread(target=stalling, name="stalling-mark", daemon=True).start()
    get_view = app.get_view

    def viewing(*args: Any, **kw: Any) -> Any:
        (marks / "view").touch()
        return get_view(*args, **kw)

    app.get_view = viewing
    return app


def main() -> None:
    engine = StallingCard(float(os.environ.get("STALLING_CARD_S", "3600")), spin=True)
    marks = os.environ.get("STALLING_MARKS")
    made = command.bootstrap

    def bootstrap(**kw: Any) -> Any:
        app = made(registry=stalling_registry(engine), **kw)
        return _marked(engine, app, Path(marks)) if marks else app

    command.bootstrap = bootstrap  # type: ignore[assignment]
    command.main()


if __name__ == "__main__":
    main()
