"""The engine contract (protocol), chance (rng), refusals (errors) and the game registry."""

from .decider import Decider
from .errors import MalformedCommand, NotYourTurn, RuleViolation
from .protocol import (
    PUBLIC,
    SERVER_ONLY,
    SPECTATOR,
    DecisionKind,
    Engine,
    GameInfo,
    MatchConfig,
    OptionSpec,
    Pending,
    Result,
    SeatOutcome,
    Visibility,
    VisibilityKind,
    command_kind,
    default_redact,
    fold,
    is_over,
    pending_for,
    private_to,
)
from .rng import Rng, derive_seed

__all__ = [
    "PUBLIC",
    "SERVER_ONLY",
    "SPECTATOR",
    "DecisionKind",
    "Decider",
    "Engine",
    "GameInfo",
    "MalformedCommand",
    "MatchConfig",
    "NotYourTurn",
    "OptionSpec",
    "Pending",
    "Result",
    "RuleViolation",
    "Rng",
    "SeatOutcome",
    "Visibility",
    "VisibilityKind",
    "command_kind",
    "default_redact",
    "derive_seed",
    "fold",
    "is_over",
    "pending_for",
    "private_to",
]
