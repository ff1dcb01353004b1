"""Command constructors over the generated messages, one per kind (bots, tests, legal_commands).

`legal_commands` lists the same few small commands over and over (a card, a commit, a threat),
so `listed()` hands out shared prebuilt instances of them. Treat listed commands as read-only:
copy one (`Command().CopyFrom(c)`) before changing it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import cache
from operator import getitem
from typing import Any

from famiglia.goodcritters.v1 import goodcritters_pb2 as pb

from .events import body_length, card_row, length_delimited, pairs_wire

Command = pb.Command
_pb: Any = pb  # enum fields take plain ints (see events.py)


def assign_loot(pairs: Iterable[tuple[str, int]]) -> Command:
    wire = pairs_wire(pairs)
    if not wire:
        return Command()  # no pairs: nothing set, as adding none to the field leaves it
    return Command.FromString(length_delimited(b"\x0a", wire))  # Command field 1, parsed in C


def place_threat(target: int) -> Command:
    return Command(place_threat=_pb.PlaceThreat(target=target))


def withdraw_threat() -> Command:
    return Command(withdraw_threat=_pb.WithdrawThreat())


def choose_action_card(card: int, commit: bool = False) -> Command:
    return Command(choose_action_card=_pb.ChooseActionCard(card=card, commit=commit))


def change_action_card(card: int) -> Command:
    return Command(change_action_card=_pb.ChangeActionCard(card=card))


def commit() -> Command:
    return Command(commit=_pb.Commit())


def end_turn() -> Command:
    return Command(end_turn=_pb.EndTurn())


def give_gift(receiver: int, loot: Sequence[str] = (), payoff_cards: int = 0, open_: bool = True) -> Command:
    return Command(
        give_gift=_pb.GiveGift(receiver=receiver, loot=loot, payoff_cards=payoff_cards, open=open_)
    )


def make_offer(
    target: int, side: int, loot: Sequence[str] = (), payoff_cards: int = 0, visibility: int = 1
) -> Command:
    return Command(
        make_offer=_pb.MakeOffer(
            target=target, side=side, loot=loot, payoff_cards=payoff_cards, visibility=visibility
        )
    )


def withdraw_offer(target: int) -> Command:
    return Command(withdraw_offer=_pb.WithdrawOffer(target=target))


class Fields:
    """A listed command's fields as plain attributes. A plain class, not a SimpleNamespace:
    CPython specialises attribute reads on its instances (~70 instructions a read, not ~370)."""


LISTED: dict[int, tuple[Command, str, Any]] = {}
"""Every shared listed command by its id: (the command, its kind, its fields as plain attributes).
`decide` reads a listed command from here instead of the message (the entry holds the command,
so its id stays its own)."""


@cache
def listed(factory: Callable[..., Command], *args: object) -> Command:
    """A shared, prebuilt instance of a small command (read-only)."""
    command = factory(*args)
    kind = str(command.WhichOneof("kind"))
    body = getattr(command, kind)
    fields = Fields()
    for f in body.DESCRIPTOR.fields:
        setattr(fields, f.name, getattr(body, f.name))
    LISTED[id(command)] = (command, kind, fields)
    return command


class SplitFields:
    """A listed split's fields: the table it was listed for, the seat of each card and their
    pairs' wire form (which the loot_assigned event repeats)."""

    __slots__ = ("table", "seats", "body")

    def __init__(self, table: tuple[str, ...], seats: tuple[int, ...], body: bytes) -> None:
        self.table = table
        self.seats = seats
        self.body = body

    @property
    def pairs(self) -> list[tuple[str, int]]:
        return list(zip(self.table, self.seats, strict=True))


SPLITS: dict[int, tuple[Command, tuple[str, ...], tuple[int, ...], bytes]] = {}
"""The Boss's splits `legal_commands` listed lately, by id: (the command, its table, the seat of
each card, their pairs' wire form), bounded (each is listed once). `decide` makes the SplitFields
of the one split played: a dozen are listed every round and one is chosen."""


def listed_split(pairs: list[tuple[str, int]]) -> Command:
    """An assign_loot command for a listed split, remembered with its pairs for `decide`."""
    table = tuple(card for card, _ in pairs)
    return listed_splits(table, [tuple(seat for _, seat in pairs)])[0]


def listed_splits(table: tuple[str, ...], splits: list[tuple[int, ...]]) -> list[Command]:
    """The assign_loot commands of splits of `table` (the seat of each card), each remembered
    with its fields for `decide`. Why: the Boss's listing is a dozen splits of a dozen cards
    every round; each is one join of prebuilt pair bytes and one parse (in C)."""
    if len(SPLITS) >= 256:
        SPLITS.clear()
    if not table:  # no pairs: nothing set, as adding none to the field leaves it (as assign_loot)
        out = [Command() for _ in splits]
        for seats, command in zip(splits, out, strict=True):
            SPLITS[id(command)] = (command, table, seats, b"")
        return out
    out = []
    rows = list(map(card_row, table))
    columns = list(zip(*rows, strict=True))  # per seat, every card's pair bytes: a one-seat split is one join
    parse = Command.FromString
    join = b"".join
    k = len(table)
    for seats in splits:
        first = seats[0]
        body = join(columns[first]) if seats.count(first) == k else join(map(getitem, rows, seats))
        command = parse(_FIELD_1[len(body)] + body if len(body) < 256 else b"\x0a" + body_length(body) + body)
        SPLITS[id(command)] = (command, table, seats, body)
        out.append(command)
    return out


_FIELD_1 = tuple(b"\x0a" + body_length(b"-" * n) for n in range(256))
"""Command field 1's tag and length prefix, for bodies below 256 bytes (a split's usually are)."""
