"""Test profiles: `quick` for `make test`, `soak` for `make soak` (FAMIGLIA_PROFILE=soak)."""

from __future__ import annotations

import os

PROFILE = os.environ.get("FAMIGLIA_PROFILE", "quick")
SOAK = PROFILE == "soak"


def examples(quick: int, soak: int) -> int:
    """How many randomized cases to run under the current profile."""
    return soak if SOAK else quick
