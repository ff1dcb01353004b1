"""Per-player holds: a player sits at one table at a time, across games.

A game's tickets live in the game's slot (`{mm:G}`), so no script can see one player's
tickets in two games at once. What joins them is one key in the player's own slot:

    mm:hold:{<player>}   string   which table the player is promised to

    lease|<game>|<proposal>|<attempt>   taken (SET NX, short TTL) before claim.lua
    table|<game>|<proposal>|<ticket>    after the claim: this table may create its match now
    seated|<game>|<match>|<ms>          the table was created at ms; tickets of this player
                                        asked for before then are stale everywhere (kept as
                                        long as such a ticket can live: invite + ticket lifetime)

The matcher takes the holds of every player of a proposal in a fixed order (sorted
player ids; on a refusal it gives back the ones it took, so two matchers never wait
on each other; one pipelined try first, then one by one if anything was in the way,
so that of two matchers wanting the same players the one reaching the first of them
wins), claims, turns its leases into `table` holds (compare-and-set: a lease
that expired and went elsewhere fails the claim back to the queue), creates the match,
finalizes, cancels the players' other tickets, then turns the holds into `seated`.

Why it cannot double book, crash or not: a table reaches CreateMatch only after every
one of its players' holds names it (atomic per player), and nobody takes a `table`
hold while its proposal is still claimed in its game; once that proposal is gone, the
next taker settles the hold from the ticket it names (matched -> `seated`, anything
else -> free). A `seated` hold refuses, for its lifetime (longer than any ticket's),
every ticket of the player created before the match: that ticket is cancelled instead.
Leases expire after `lease_ms`, so a matcher that dies before its claim blocks its
players that long; a claimed table keeps its holds until the claim retry finishes or
releases it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources

import redis
from redis.commands.core import Script

from famiglia.redis_clients import LOADS, load_script, script_lost

LEASE, TABLE, SEATED = "lease", "table", "seated"


def hold_key(player_id: str) -> str:
    return "mm:hold:{" + player_id + "}"


def seated_key(player_id: str) -> str:
    """The player's newest `seated` hold, kept apart from the hold itself: a newer ticket's
    attempt replaces the hold by its lease, and should that attempt give up (or its matcher
    die), the hold is gone, while the player's older tickets must still be known stale."""
    return "mm:seated:{" + player_id + "}"


@dataclass(frozen=True)
class Hold:
    kind: str
    game_id: str
    ref: str
    """the proposal (lease, table) or the match (seated)."""
    detail: str = ""
    """lease: the attempt; table: the player's ticket; seated: when the match was made (ms)."""

    def encode(self) -> str:
        return "|".join((self.kind, self.game_id, self.ref, self.detail))

    @classmethod
    def parse(cls, raw: str) -> Hold | None:
        parts = raw.split("|")
        if len(parts) != 4 or parts[0] not in (LEASE, TABLE, SEATED):
            return None
        return cls(*parts)

    @property
    def seated_ms(self) -> int:
        return int(self.detail) if self.kind == SEATED and self.detail.isdigit() else 0


@dataclass(frozen=True)
class HoldSeat:
    """One player of a proposal as the holds see it: the ticket they come with."""

    player_id: str
    ticket_id: str
    created_ms: int = 0


@dataclass(frozen=True)
class Taken:
    """The outcome of taking a proposal's holds: `lease` names this attempt; `refused_by` is
    the hold that refused a player (`stale` when it proves that player's ticket stale)."""

    lease: str
    player_id: str = ""
    refused_by: Hold | None = None

    @property
    def ok(self) -> bool:
        return not self.player_id

    @property
    def stale(self) -> bool:
        return self.refused_by is not None and self.refused_by.kind == SEATED


class PlayerHolds:
    def __init__(self, client: redis.Redis, *, proposal_pending: Callable[[str, str], bool],
                 settle: Callable[[Hold], Hold | None], lease_ms: int = 10_000,
                 keep_ms: int = 24 * 3600 * 1000, seated_ms: int = 660_000) -> None:
        """`proposal_pending(game, proposal)`: is that table still claimed in its game;
        `settle(table hold)`: the `seated` hold a finished table leaves, or None if it failed."""
        self.client = client
        self.proposal_pending = proposal_pending
        self.settle = settle
        self.lease_ms = lease_ms
        self.keep_ms = keep_ms
        self.seated_ms = seated_ms
        self._swap: Script = client.register_script(
            resources.files(__package__).joinpath("lua", "hold_swap.lua").read_text(encoding="utf-8"))

    @staticmethod
    def table(game_id: str, proposal_id: str, seat: HoldSeat) -> str:
        return Hold(TABLE, game_id, proposal_id, seat.ticket_id).encode()

    def get(self, player_id: str) -> Hold | None:
        raw = self.client.get(hold_key(player_id))
        return Hold.parse(str(raw)) if raw else None

    def swap(self, player_id: str, new: str, ttl_ms: int, *accepted: str) -> bool:
        """Set (or delete, new='') the hold only if it is one of `accepted` ('=v', '^prefix', '-')."""
        return bool(self._swap(keys=[hold_key(player_id)], args=[new, ttl_ms, *accepted]))

    # -- a new table -----------------------------------------------------------------
    def take(self, game_id: str, proposal_id: str, seats: Sequence[HoldSeat]) -> Taken:
        """Lease every player of the proposal, in player order, or none."""
        lease = Hold(LEASE, game_id, proposal_id, secrets.token_hex(6)).encode()
        ordered = sorted(seats, key=lambda s: s.player_id)
        pipe = self.client.pipeline(transaction=False)  # the usual case, nobody in the way: one round trip
        for seat in ordered:
            pipe.set(hold_key(seat.player_id), lease, nx=True, px=self.lease_ms)
            pipe.get(seated_key(seat.player_id))
        replies = pipe.execute()
        got = replies[0::2]
        for seat, raw in zip(ordered, replies[1::2], strict=True):
            seated = Hold.parse(str(raw)) if raw else None
            if seated is not None and seat.created_ms <= seated.seated_ms:  # seated elsewhere since
                self._give_back([s for s, ok in zip(ordered, got, strict=True) if ok], lease)
                return Taken(lease, seat.player_id, seated)
        if all(got):
            return Taken(lease)
        self._give_back([seat for seat, ok in zip(ordered, got, strict=True) if ok], lease)
        taken: list[HoldSeat] = []  # then the careful way: one by one, so the first refusal stops us
        for seat in ordered:
            refused_by = self._take_one(seat, lease)
            if refused_by is not None:
                self._give_back(taken, lease)
                return Taken(lease, seat.player_id, refused_by)
            taken.append(seat)
        return Taken(lease)

    def _take_one(self, seat: HoldSeat, lease: str) -> Hold | None:
        """None when taken, else the hold in the way."""
        key = hold_key(seat.player_id)
        held: Hold | None = None
        for _ in range(4):  # each round either takes the hold or clears a finished one out of the way
            if self.client.set(key, lease, nx=True, px=self.lease_ms):
                return None
            got = self.client.get(key)
            if got is None:
                continue  # expired meanwhile
            raw = str(got)
            held = Hold.parse(raw)
            if held is None:  # not ours to read: clear it
                self.swap(seat.player_id, "", 0, f"={raw}")
            elif held.kind == SEATED:
                if seat.created_ms <= held.seated_ms:
                    return held  # seated elsewhere since this ticket was made
                if self.swap(seat.player_id, lease, self.lease_ms, f"={raw}"):
                    return None
            elif held.kind == TABLE and not self.proposal_pending(held.game_id, held.ref):
                settled = self.settle(held)  # its matcher died after finishing: finish its bookkeeping
                if settled is not None:
                    self._mark_seated([seat.player_id], settled.encode())
                self.swap(seat.player_id, settled.encode() if settled else "", self.seated_ms, f"={raw}")
            else:
                return held  # another table is being formed with this player
        return held or Hold(LEASE, "", "", "")  # kept changing under us: busy, try next tick

    def _swaps(self, swaps: Sequence[tuple[str, Sequence[str | int]]]) -> list[int]:
        """Several players' swaps in one round trip: (player, args) each. EVALSHA straight into the
        pipeline (redis-py's Script would ask SCRIPT EXISTS first, one more round trip each time);
        a NOSCRIPT reply (Redis restarted) fails every one of them alike, so loading and resending is
        safe (after a failover, twice: `famiglia.redis_clients.load_script`)."""
        if not swaps:
            return []
        for attempt in range(LOADS + 1):
            pipe = self.client.pipeline(transaction=False)
            for player_id, args in swaps:
                pipe.evalsha(self._swap.sha, 1, hold_key(player_id), *args)
            try:
                return [int(r) for r in pipe.execute()]
            except redis.exceptions.NoScriptError as exc:
                if attempt == LOADS:
                    raise script_lost(exc) from exc
                load_script(self.client, self._swap, again=attempt > 0)
        return []

    def give_back(self, seats: Sequence[HoldSeat], lease: str) -> None:
        """Before the claim: the players this attempt's lease still holds are free (a hold that
        went elsewhere, or that a claim retry of the same table pinned since, is left as it is)."""
        self._give_back(seats, lease)

    def _give_back(self, seats: Sequence[HoldSeat], *values: str) -> None:
        accepted = [f"={v}" for v in values if v]
        self._swaps([(seat.player_id, ["", 0, *accepted]) for seat in seats])

    def commit(self, game_id: str, proposal_id: str, seats: Sequence[HoldSeat], lease: str) -> bool:
        """After the claim: every lease becomes this table's hold, or False (a lease was lost)."""
        tables = [(seat.player_id, self.table(game_id, proposal_id, seat)) for seat in seats]
        return all(self._swaps([(p, [t, self.keep_ms, f"={lease}", f"={t}"]) for p, t in tables]))

    # -- a claimed table -------------------------------------------------------------
    def retake(self, game_id: str, proposal_id: str, seats: Sequence[HoldSeat]) -> bool:
        """A claim retry makes every hold this table's again (a crashed matcher's lease, its
        table hold, or nothing); False if one went to another table meanwhile, or if a player
        was seated since asking for this table (`seats` carry when each asked). An empty hold
        does not prove the player free: their lease may have run out, they sat elsewhere, and a
        newer wish's attempt took and gave back the hold, leaving the seating in `seated_key`
        only. Read once every hold is ours: nobody can seat them after that."""
        done: list[HoldSeat] = []
        ordered = sorted(seats, key=lambda s: s.player_id)
        for seat in ordered:
            table = self.table(game_id, proposal_id, seat)
            lease_prefix = Hold(LEASE, game_id, proposal_id).encode()  # "lease|G|P|": any attempt at P
            if not self.swap(seat.player_id, table, self.keep_ms, f"={table}", f"^{lease_prefix}", "-"):
                self._unpin(game_id, proposal_id, done)
                return False
            done.append(seat)
        pipe = self.client.pipeline(transaction=False)
        for seat in ordered:
            pipe.get(seated_key(seat.player_id))
        for seat, raw in zip(ordered, pipe.execute(), strict=True):
            seated = Hold.parse(str(raw)) if raw else None
            if seated is not None and seat.created_ms <= seated.seated_ms:  # seated elsewhere since
                self._unpin(game_id, proposal_id, done)
                return False
        return True

    def _unpin(self, game_id: str, proposal_id: str, seats: Sequence[HoldSeat]) -> None:
        """Free the holds a retake pinned, each by its own value: a player's names their own ticket,
        so the value of the one the retake failed on left the others pinned for a day."""
        self._swaps([(s.player_id, ["", 0, f"={self.table(game_id, proposal_id, s)}"]) for s in seats])

    def free(self, game_id: str, proposal_id: str, seats: Sequence[HoldSeat], lease: str = "") -> None:
        """The table will not be: its players are free (only holds still naming it)."""
        self._swaps([(seat.player_id, ["", 0, f"={self.table(game_id, proposal_id, seat)}",
                                       *([f"={lease}"] if lease else [])]) for seat in seats])

    def seat(self, game_id: str, proposal_id: str, seats: Sequence[HoldSeat], match_id: str, now_ms: int) -> None:
        """The table exists: its players' holds become `seated` (older tickets are stale)."""
        seated = Hold(SEATED, game_id, match_id, str(now_ms)).encode()
        self._mark_seated([seat.player_id for seat in seats], seated)
        self._swaps([(seat.player_id, [seated, self.seated_ms, f"={self.table(game_id, proposal_id, seat)}"])
                     for seat in seats])

    def _mark_seated(self, players: Sequence[str], seated: str) -> None:
        """Each player's newest seating, for as long as a `seated` hold lasts (`seated_key`)."""
        pipe = self.client.pipeline(transaction=False)
        for player_id in players:
            pipe.set(seated_key(player_id), seated, px=self.seated_ms)
        pipe.execute()
