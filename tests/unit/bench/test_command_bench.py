"""The command-path benchmark's replaying client: matches are created before the clock
starts, played in turn, and only SubmitCommand is called inside the timed loop."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from google.protobuf import any_pb2

from famiglia.bench.core import _Replay


@dataclass
class _FakeClient:
    """Counts CreateMatch calls and records each SubmitCommand's match, seat token and id."""

    created: int = 0
    submitted: list[tuple[str, str, str]] = field(default_factory=list)

    def create_match(self, game_id: str, seats: int, *, seed: int | None = None) -> Any:
        self.created += 1
        return SimpleNamespace(match_id=f"m{self.created}", seat_tokens=[f"t{self.created}.{s}" for s in range(seats)])

    @property
    def stub(self) -> Any:
        def submit(request: Any, metadata: Any) -> None:
            self.submitted.append((request.match_id, dict(metadata)["authorization"], request.command_id))
        return SimpleNamespace(SubmitCommand=submit)


def _spec(commands: int) -> tuple[str, int, int, list[tuple[int, bytes]]]:
    blob = any_pb2.Any(type_url="type.googleapis.com/x.Command", value=b"").SerializeToString()
    return ("goodcritters", 2, 7, [(i % 2, blob) for i in range(commands)])


def test_the_matches_a_run_reaches_are_created_before_it_and_played_in_turn() -> None:
    client = _FakeClient()
    replay = _Replay(client, _spec(3))
    replay.create_matches(7)  # 7 calls of 3-command matches reach 3 matches
    assert client.created == 3
    for _ in range(7):
        replay()
    assert client.created == 3, "no CreateMatch inside the loop while created matches remain"
    assert [m for m, _, _ in client.submitted] == ["m1"] * 3 + ["m2"] * 3 + ["m3"]
    assert [t for _, t, _ in client.submitted[:3]] == ["Bearer t1.0", "Bearer t1.1", "Bearer t1.0"]
    assert len({c for _, _, c in client.submitted}) == 7, "every command id is new"


def test_a_run_that_outlasts_its_matches_creates_the_next_itself() -> None:
    client = _FakeClient()
    replay = _Replay(client, _spec(2))
    replay.create_matches(2)
    assert client.created == 1
    for _ in range(5):
        replay()
    assert client.created == 3
    assert [m for m, _, _ in client.submitted] == ["m1", "m1", "m2", "m2", "m3"]
