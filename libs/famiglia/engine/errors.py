"""Refusals are values with a rule id, never crashes."""

from __future__ import annotations


class RuleViolation(Exception):
    """A command the rules refuse. `code` is a rule id from rules/*.md (e.g. "GC-A03")."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class MalformedCommand(RuleViolation):
    """A command that is not even a well-formed command of this game (INVALID_ARGUMENT)."""


class NotYourTurn(RuleViolation):
    """The seat is not one that `pending` names for this kind of command."""
