"""`python -m tests.support.stalling_command`: the command service as `python -m services.command`
runs it, whose only game is Stalling Card (famiglia.testgames.stalling): every `decide` loops for
STALLING_CARD_S seconds (an hour by default: for ever, as far as a test can tell), as a runaway
engine would. For the end-to-end tests of the stuck-call watchdog."""

from __future__ import annotations

import os

import services.command.__main__ as command
from famiglia.testgames.stalling import StallingCard, stalling_registry


def main() -> None:
    engine = StallingCard(float(os.environ.get("STALLING_CARD_S", "3600")), spin=True)
    made = command.bootstrap
    command.bootstrap = lambda **kw: made(registry=stalling_registry(engine), **kw)  # type: ignore[assignment]
    command.main()


if __name__ == "__main__":
    main()
