"""A dispatcher's task queue that sends nowhere: for tests where people play and only the
dispatcher's other work (turn notifications, the live set) is looked at."""

from __future__ import annotations

import contextlib
from typing import Any


class NoTasks:
    def decide(self, *args: Any, **kwargs: Any) -> None:
        pass

    def clock(self, *args: Any, **kwargs: Any) -> None:
        pass

    def batch(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()
