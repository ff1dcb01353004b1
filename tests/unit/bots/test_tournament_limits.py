"""CreateTournament holds a request to `Limits` and the games' own option rules before anything
is planned or stored, and draws the seed itself when the request names none."""

from __future__ import annotations

import os

import pytest

from famiglia.bots.policy import PARAMETERS, make_policy
from famiglia.bots.tournament import GamePlan, Limits, TournamentSpec, plan, planned_matches
from famiglia.cli.tournament import SIZES
from famiglia.engine.registry import default_registry
from famiglia.grpcutil.errors import InvalidArgument
from famiglia.v1 import tournament_service_pb2 as pb
from services.bots.entrypoints.grpc_server import spec_from_request

REGISTRY = default_registry()
GRIFTERS = pb.TournamentGame(game_id="grifters")


def refused(**fields: object) -> str:
    fields.setdefault("games", [GRIFTERS])
    fields.setdefault("entrants", ["random"])
    with pytest.raises(InvalidArgument) as exc:
        spec_from_request(pb.CreateTournamentRequest(**fields), REGISTRY)  # type: ignore[arg-type]
    return exc.value.code


@pytest.mark.parametrize(("fields", "code"), [
    ({"matches_per_game": 2_000_000}, "bad_matches_per_game"),  # the audit's 900 MB plan
    ({"matches_per_game": Limits.MATCHES_PER_GAME + 1}, "bad_matches_per_game"),
    ({"matches_per_game": -5}, "bad_matches_per_game"),
    ({"rounds": -2}, "bad_rounds"),
    ({"rounds": Limits.ROUNDS + 1, "round_robin": True}, "bad_rounds"),
    ({"concurrency": -3}, "bad_concurrency"),
    ({"concurrency": Limits.CONCURRENCY + 1}, "bad_concurrency"),
    ({"deadline_seconds": -1.0}, "bad_deadline"),
    ({"deadline_seconds": float("nan")}, "bad_deadline"),
    ({"deadline_seconds": float("inf")}, "bad_deadline"),
    ({"deadline_seconds": Limits.DEADLINE_SECONDS + 1}, "bad_deadline"),
    ({"entrants": ["random"] * (Limits.ENTRANTS + 1)}, "too_many_entrants"),
    ({"entrants": ["clairvoyant"]}, "unknown_policy"),
    ({"entrants": ["ismcts?iterations=1e20"]}, "bad_policy_params"),
    ({"entrants": ["ismcts?iterations=99999999999999999999"]}, "bad_policy_params"),
    ({"entrants": ["ismcts?seconds=nan"]}, "bad_policy_params"),
    ({"entrants": ["ismcts?iterations=-5&seconds=abc"]}, "bad_policy_params"),
    ({"entrants": ["heuristic?sample=2"]}, "bad_policy_params"),
    ({"games": [pb.TournamentGame(game_id="chess")]}, "unknown_game"),
    ({"games": [pb.TournamentGame(game_id="grifters", seat_counts=[9])]}, "bad_seats"),
    ({"games": [pb.TournamentGame(game_id="grifters", seat_counts=[2] * (Limits.SEAT_COUNTS + 1))]}, "bad_seats"),
    ({"games": [GRIFTERS] * (Limits.GAMES + 1)}, "too_many_games"),
    ({"games": [pb.TournamentGame(game_id="grifters", options={"zz": "1"})]}, "unknown_option"),
    ({"games": [pb.TournamentGame(game_id="grifters", options={"isk_tokens": "99999999999999999999"})]}, "GR-F01"),
    ({"games": [pb.TournamentGame(game_id="nostra_city", seat_counts=[3, 5], options={"first_player_seat": "4"})]},
     "NC-S16"),
    ({"name": "n" * (Limits.NAME_CHARS + 1)}, "bad_name"),
    ({"name": "cup\x00"}, "bad_name"),  # the tournaments read model (PostgreSQL text) cannot hold it
    # shown on one line (standings, the CLI, each of its matches' cancel reason): as a seat's name
    ({"name": "cup\t2026"}, "bad_name"), ({"name": "\x1b[2Jcup"}, "bad_name"), ({"name": "cup\u202e"}, "bad_name"),
    ({"name": "two\nlines"}, "bad_name"), ({"name": "cup\u20282026"}, "bad_name"),
    ({"request_id": "r" * 129}, "bad_request_id"),
    ({"matches_per_game": Limits.MATCHES_PER_GAME, "games": [GRIFTERS] * 3}, "too_many_matches"),
    ({"round_robin": True, "rounds": Limits.ROUNDS, "entrants": ["random"] * Limits.ENTRANTS,
      "games": [pb.TournamentGame(game_id="grifters", seat_counts=[2, 3, 4] * 5)]}, "too_many_matches"),
])
def test_a_request_beyond_the_limits_is_refused_with_a_stable_code(fields: dict[str, object], code: str) -> None:
    assert refused(**fields) == code


def test_without_a_seed_the_server_draws_one_and_an_explicit_seed_is_kept() -> None:
    """`seed or 1` let a spectator rebuild every deal of a match in play."""
    drawn = {spec_from_request(pb.CreateTournamentRequest(games=[GRIFTERS], entrants=["random"]), REGISTRY).seed
             for _ in range(4)}
    assert len(drawn) == 4 and 1 not in drawn
    explicit = pb.CreateTournamentRequest(games=[GRIFTERS], entrants=["random"], seed=7)
    assert spec_from_request(explicit, REGISTRY).seed == 7


def test_the_tournament_api_never_shows_the_seed() -> None:
    """The Tournament message has no seed field (the matches' seeds show only once they finish)."""
    assert not any("seed" in name for name in pb.Tournament.DESCRIPTOR.fields_by_name)
    assert not any("seed" in name for name in pb.MatchSummary.DESCRIPTOR.fields_by_name)


def test_the_defaults_and_the_largest_allowed_request_are_accepted() -> None:
    spec = spec_from_request(pb.CreateTournamentRequest(), REGISTRY)
    assert spec.concurrency == 4 and spec.rounds == 1 and len(spec.games) == len(list(REGISTRY))
    big = spec_from_request(pb.CreateTournamentRequest(
        games=[GRIFTERS, pb.TournamentGame(game_id="goodcritters")], entrants=["random"],
        matches_per_game=Limits.MATCHES_PER_GAME, concurrency=Limits.CONCURRENCY,
        deadline_seconds=Limits.DEADLINE_SECONDS), REGISTRY)
    assert planned_matches(big) == 2 * Limits.MATCHES_PER_GAME <= Limits.TOTAL_MATCHES


def test_the_make_run_and_bench_requests_fit_the_limits() -> None:
    for size in SIZES.values():
        make_policy(size.ismcts)
        assert size.matches_per_game <= Limits.MATCHES_PER_GAME
        assert size.deadline_seconds <= Limits.DEADLINE_SECONDS
    assert 4 * (os.cpu_count() or 2) <= Limits.CONCURRENCY


@pytest.mark.parametrize("round_robin", [False, True])
def test_the_plan_size_is_counted_without_making_the_plan(round_robin: bool) -> None:
    spec = TournamentSpec(name="t", games=(GamePlan("a", (3,)), GamePlan("b", (2, 4)), GamePlan("c", ())),
                          entrants=("x", "y", "z"), matches_per_game=5, round_robin=round_robin, rounds=2)
    assert planned_matches(spec) == len(plan(spec))


def test_every_policy_parameter_has_bounds_that_its_policy_accepts() -> None:
    for name, params in PARAMETERS.items():
        for key, p in params.items():
            low = str(int(p.low)) if p.kind is int else str(p.low)
            high = str(int(p.high)) if p.kind is int else str(p.high)
            make_policy(f"{name}?{key}={low}")
            make_policy(f"{name}?{key}={high}")


def test_every_policy_the_bots_know_has_its_parameter_bounds_and_a_factory() -> None:
    """`make_policy` and `checked_spec` judge a name by PARAMETERS: a policy added to one place
    and not the others would be refused at creation or break a worker."""
    from famiglia.bots.policy import PARAMETERS, POLICY_NAMES, _factories

    assert set(PARAMETERS) == set(_factories()) == set(POLICY_NAMES)
