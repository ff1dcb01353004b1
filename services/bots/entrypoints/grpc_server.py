"""famiglia.v1.TournamentService over gRPC: requests in, tournaments out."""

from __future__ import annotations

import dataclasses
import secrets
import threading
from collections import Counter
from collections.abc import Sequence

import grpc

from famiglia.auth import TokenSigner
from famiglia.bots import POLICY_NAMES, PolicySpec
from famiglia.bots.standings import RunningStandings, Standing, standings
from famiglia.bots.tournament import BadTournament, GamePlan, PlannedMatch, TournamentSpec, check, plan
from famiglia.engine.registry import Registry
from famiglia.grpcutil.errors import AlreadyExists, InvalidArgument, NotFound, PermissionDenied
from famiglia.grpcutil.operators import operator_of
from famiglia.grpcutil.readiness import Dependency
from famiglia.grpcutil.server import bearer_token, build_server, rpc
from famiglia.grpcutil.tls import Transport
from famiglia.telemetry import get_logger, stored_context
from famiglia.v1 import tournament_service_pb2 as pb
from famiglia.v1 import tournament_service_pb2_grpc as pb_grpc

from ..tournaments import CANCELLED, FINISHED, RUNNING, TournamentRecord, TournamentRepo, TournamentSwept

log = get_logger("famiglia.bots.tournaments")

_STATUS = {RUNNING: pb.TOURNAMENT_RUNNING, FINISHED: pb.TOURNAMENT_FINISHED, CANCELLED: pb.TOURNAMENT_CANCELLED}


MAX_LIST = 100
"""ListTournaments answers at most this many (each answer carries a tournament's standings)."""
MAX_REQUEST_ID = 128


def spec_from_request(request: pb.CreateTournamentRequest, registry: Registry) -> TournamentSpec:
    """The request's spec, defaults filled in, held to `Limits` (INVALID_ARGUMENT with the code)."""
    if len(request.request_id) > MAX_REQUEST_ID:
        raise InvalidArgument("bad_request_id", f"request_id is at most {MAX_REQUEST_ID} characters")
    entrants = tuple(request.entrants) or POLICY_NAMES
    games = []
    for game in list(request.games) or [pb.TournamentGame(game_id=g) for g in registry]:
        default = (registry.get(game.game_id).info.min_players,) if game.game_id in registry else ()
        games.append(GamePlan(game.game_id, tuple(game.seat_counts) or default, dict(game.options)))
    spec = TournamentSpec(
        name=request.name or "tournament", games=tuple(games), entrants=entrants,
        matches_per_game=request.matches_per_game or len(entrants) * 2, round_robin=request.round_robin,
        rounds=request.rounds or 1,
        # The seed predicts every deal of every match, so without one the server draws it:
        # a spectator cannot rebuild the decks of a match in play. An explicit seed is kept (a
        # reproducible run); the API never shows it.
        seed=request.seed or secrets.randbits(63),
        concurrency=request.concurrency or 4, deadline_seconds=request.deadline_seconds,
    )
    try:
        check(spec, registry)
    except BadTournament as exc:
        raise InvalidArgument(exc.code, exc.message) from None
    return spec


def tournament_proto(record: TournamentRecord, *, include_matches: bool = False,
                     rows: Sequence[Standing] | None = None,
                     planned: Sequence[PlannedMatch] | None = None) -> pb.Tournament:
    """The tournament as the API shows it; `rows` are its standings and `planned` its
    plan if already known."""
    planned = plan(record.spec) if planned is None else planned
    out = pb.Tournament(tournament_id=record.tournament_id, name=record.spec.name,
                        status=_STATUS.get(record.status, pb.TOURNAMENT_STATUS_UNSPECIFIED),
                        entrants=list(record.spec.entrants), moves=record.total_moves,
                        elapsed_seconds=record.elapsed_seconds, planned=len(planned),
                        finished=len(record.results))
    by_index = {p.index: p for p in planned}
    planned_per_game = Counter(p.game_id for p in planned)
    started = Counter(by_index[i].game_id for i in record.started if i in by_index)
    finished = Counter(by_index[i].game_id for i, m in record.started.items()
                       if i in by_index and m in record.results)
    for game in record.spec.games:
        out.games.add(game_id=game.game_id, planned=planned_per_game[game.game_id],
                      started=started[game.game_id], finished=finished[game.game_id])
    for row in standings(record.match_records()) if rows is None else rows:
        out.standings.add(game_id=row.game_id, entrant=row.entrant, matches=row.matches, wins=row.wins,
                          mean_rank=row.mean_rank, mu=row.mu, sigma=row.sigma, ordinal=row.ordinal)
    if include_matches:
        for m in sorted(record.match_records(), key=lambda r: (r.finished_ms, r.match_id)):
            seats = sorted(m.seats, key=lambda s: s.seat)
            out.matches.add(match_id=m.match_id, game_id=m.game_id, entrants=[s.entrant for s in seats],
                            ranks=[s.rank for s in seats], scores=[s.score for s in seats], commands=m.commands)
    return out


def _same_tournament(stored: TournamentSpec, asked: TournamentSpec, *, seed_given: bool) -> bool:
    """Whether a creation retried under a request id asks for the tournament the id made: the
    same spec, its seed aside when the retry names none (the server then draws a new one)."""
    if not seed_given:
        asked = dataclasses.replace(asked, seed=stored.seed)
    return stored.to_json() == asked.to_json()


class TournamentServicer(pb_grpc.TournamentServiceServicer):
    """Anyone may read tournaments and the policies; only an operator creates or cancels one
    (`signer` reads the operator token; without one nobody can): a tournament spends the bot
    workers' time by the thousand matches, and any caller could cancel anyone's."""

    def __init__(self, repo: TournamentRepo, registry: Registry, signer: TokenSigner | None = None) -> None:
        self.repo = repo
        self.registry = registry
        self.signer = signer
        self._standings: dict[str, tuple[int, list[Standing]]] = {}
        self._running: dict[str, RunningStandings] = {}
        self._plans: dict[str, list[PlannedMatch]] = {}
        self._lock = threading.Lock()

    def _proto(self, record: TournamentRecord, include_matches: bool = False) -> pb.Tournament:
        """Standings are rated again only when a result came in since the last call, and
        then only the new results are folded in (RunningStandings): a client polling a
        1,000-match tournament would otherwise cost tens of ms a poll.
        The plan (fixed by the spec) is made once per tournament, not per call."""
        with self._lock:
            cached = self._standings.get(record.tournament_id)
            planned = self._plans.get(record.tournament_id)
        if planned is None:
            planned = plan(record.spec)
            with self._lock:
                if len(self._plans) > 256:
                    self._plans.clear()
                self._plans[record.tournament_id] = planned
        if cached is not None and cached[0] == len(record.results):
            rows = cached[1]
        else:
            with self._lock:
                running = self._running.get(record.tournament_id)
                if running is None:
                    if len(self._running) > 256:
                        self._running.clear()
                    running = self._running[record.tournament_id] = RunningStandings()
                rows = running(record.match_records())
                if len(self._standings) > 256:
                    self._standings.clear()
                self._standings[record.tournament_id] = (len(record.results), rows)
        return tournament_proto(record, include_matches=include_matches, rows=rows, planned=planned)

    def _get(self, tid: str) -> TournamentRecord:
        record = self.repo.get(tid) if tid else None
        if record is None:
            raise NotFound("unknown_tournament", f"no tournament {tid!r}")
        return record

    def _operator(self, context: grpc.ServicerContext, what: str) -> str:
        if self.signer is None:
            raise PermissionDenied("operator_only", f"this server lets nobody {what}")
        return operator_of(self.signer, bearer_token(context), what)

    @rpc
    def CreateTournament(self, request, context):
        self._operator(context, "create a tournament")
        spec = spec_from_request(request, self.registry)
        try:
            tid = self.repo.create(spec, request.request_id, trace=stored_context())
        except TournamentSwept:
            raise AlreadyExists("request_id_reused", "request_id made a tournament whose records were swept "
                                                     "since; use a new request_id for a new tournament") from None
        record = self._get(tid)
        if request.request_id and not _same_tournament(record.spec, spec, seed_given=bool(request.seed)):
            raise AlreadyExists("request_id_reused", "request_id was already used to create a different "
                                                     "tournament; use a new request_id for a new tournament")
        return self._proto(record)

    @rpc
    def GetTournament(self, request, context):
        return self._proto(self._get(request.tournament_id), include_matches=request.include_matches)

    @rpc
    def ListTournaments(self, request, context):
        reply = pb.ListTournamentsResponse()
        for tid in self.repo.ids(limit=min(request.limit, MAX_LIST) if request.limit > 0 else 20):
            record = self.repo.get(tid)
            if record is not None:
                reply.tournaments.append(self._proto(record))
        return reply

    @rpc
    def CancelTournament(self, request, context):
        """No further match starts, and the runner cancels the matches in play (CancelMatch) at
        its next step: only Redis is written here, so the answer stays prompt however many
        matches there are. Asked again, it lists them again (finishing the job a runner killed
        mid-way left); a finished tournament stays finished."""
        operator = self._operator(context, "cancel a tournament")
        record = self._get(request.tournament_id)
        if record.status == RUNNING:
            self.repo.set_status(record.tournament_id, CANCELLED)
            log.info("tournament_cancelled", tournament_id=record.tournament_id, operator=operator)
        elif record.status == CANCELLED:
            self.repo.cancel_matches_of(record.tournament_id)
        return self._proto(self._get(request.tournament_id))

    @rpc
    def ListPolicies(self, request, context):
        return pb.ListPoliciesResponse(policies=[str(PolicySpec(n)) for n in POLICY_NAMES], games=list(self.registry))


def serve(repo: TournamentRepo, registry: Registry, address: str, workers: int = 16, *,
          signer: TokenSigner, dependencies: Sequence[Dependency] = (),
          transport: Transport | None = None) -> tuple[grpc.Server, int]:
    """A TournamentService server bound to `address` (not yet started); `signer` reads the
    operator tokens that creating and cancelling need; health is SERVING while `dependencies` answer."""
    return build_server(
        address,
        [(pb_grpc.add_TournamentServiceServicer_to_server, TournamentServicer(repo, registry, signer),
          "famiglia.v1.TournamentService")],
        workers=workers,
        dependencies=dependencies,
        transport=transport,
    )
