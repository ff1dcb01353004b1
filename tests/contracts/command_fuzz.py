"""Well-formed commands that nobody listed, for the engine contract's refusal check.

A client may compose any command of its game's `Command` message (README, "ListLegalCommands":
"the server decides it"), so `decide` must answer every one with events or a `RuleViolation`
(a rule id and a message), never another exception. Two sources, both from the proto's own
descriptor, so every game gets them without a binding:

- `mutated`: a listed command with one field changed, added or removed (the near misses a
  client makes: a card it no longer holds, a seat out of range, one target too many);
- `composed`: a command of any kind filled at random (kinds the state does not ask for,
  fields left empty, repeated fields of any length).

Values come from the state's own vocabulary (every string and number in the seats' listed
commands and views: card ids, gangsters, seats) and from the edges (-1, 0, int32 bounds, "").
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

_INT32 = (-(2**31), 2**31 - 1)
_EDGE_INTS = (-1, 0, 1, 2, 3, 7, 99, *_INT32)
_EDGE_STRINGS = ("", "x", "é", " ")
_MAX_REPEATED = 4
_MAX_DEPTH = 3

_SIGNED = {FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32,
           FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_SFIXED64}
_UNSIGNED = {FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32,
             FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64}


@dataclass
class Vocabulary:
    """The strings and whole numbers a state's messages use, to compose plausible commands."""

    strings: set[str] = field(default_factory=lambda: set(_EDGE_STRINGS))
    ints: set[int] = field(default_factory=lambda: set(_EDGE_INTS))

    def learn(self, message: Message) -> None:
        for fd, value in message.ListFields():
            values = value if fd.is_repeated else [value]
            for v in values:
                if isinstance(v, Message):
                    self.learn(v)
                elif isinstance(v, str):
                    self.strings.add(v)
                elif isinstance(v, int) and not isinstance(v, bool):
                    self.ints.add(v)


def vocabulary(messages: Iterable[Message]) -> Vocabulary:
    vocab = Vocabulary()
    for m in messages:
        vocab.learn(m)
    return vocab


def _scalar(fd: FieldDescriptor, rng: random.Random, vocab: Vocabulary) -> Any:
    t = fd.type
    if t == FieldDescriptor.TYPE_BOOL:
        return rng.random() < 0.5
    if t == FieldDescriptor.TYPE_STRING:
        return rng.choice(sorted(vocab.strings))
    if t == FieldDescriptor.TYPE_BYTES:
        return rng.choice((b"", b"\x00", b"x"))
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return rng.choice((0.0, -1.0, 1.5, 1e9))
    if t == FieldDescriptor.TYPE_ENUM:
        numbers = [v.number for v in fd.enum_type.values]
        return rng.choice(numbers) if rng.random() < 0.9 else max(numbers) + 1
    ints = sorted(vocab.ints)
    if t in _UNSIGNED:
        ints = [i for i in ints if i >= 0]
    return rng.choice([min(max(i, _INT32[0]), _INT32[1]) for i in ints])


def _fill(message: Message, rng: random.Random, vocab: Vocabulary, depth: int) -> None:
    desc: Descriptor = message.DESCRIPTOR
    chosen = {o.name: rng.choice(o.fields) for o in desc.oneofs}
    for fd in desc.fields:
        oneof = fd.containing_oneof
        if oneof is not None and chosen[oneof.name] is not fd:
            continue
        if rng.random() < 0.35 and oneof is None:
            continue
        _set(message, fd, rng, vocab, depth)


def _set(message: Message, fd: FieldDescriptor, rng: random.Random, vocab: Vocabulary, depth: int) -> None:
    is_message = fd.type == FieldDescriptor.TYPE_MESSAGE
    if fd.is_repeated:
        target = getattr(message, fd.name)
        del target[:]
        for _ in range(rng.randrange(_MAX_REPEATED + 1)):
            if is_message:
                if depth < _MAX_DEPTH:
                    _fill(target.add(), rng, vocab, depth + 1)
            else:
                target.append(_scalar(fd, rng, vocab))
    elif is_message:
        sub = getattr(message, fd.name)
        sub.SetInParent()
        if depth < _MAX_DEPTH:
            _fill(sub, rng, vocab, depth + 1)
    else:
        setattr(message, fd.name, _scalar(fd, rng, vocab))


def composed(command_type: type[Message], rng: random.Random, vocab: Vocabulary) -> Message:
    """A command of a random kind with random fields."""
    command = command_type()
    _fill(command, rng, vocab, 0)
    return command


def mutated(command: Message, rng: random.Random, vocab: Vocabulary) -> Message:
    """`command` with one field, somewhere inside it, set anew, cleared or (repeated) lengthened."""
    out = type(command)()
    out.CopyFrom(command)
    holders: list[tuple[Message, FieldDescriptor]] = []

    def walk(m: Message, depth: int) -> None:
        for fd in m.DESCRIPTOR.fields:
            oneof = fd.containing_oneof
            if oneof is not None and m.WhichOneof(oneof.name) not in (None, fd.name) and depth == 0:
                continue  # the command's own kind stays (another kind is `composed`'s job)
            holders.append((m, fd))
            if fd.type != FieldDescriptor.TYPE_MESSAGE:
                continue
            if fd.is_repeated:
                for sub in getattr(m, fd.name):
                    walk(sub, depth + 1)
            elif m.HasField(fd.name):
                walk(getattr(m, fd.name), depth + 1)

    walk(out, 0)
    holders = [(m, fd) for m, fd in holders if m is not out]  # never the oneof itself
    if not holders:
        return out
    m, fd = rng.choice(holders)
    roll = rng.random()
    if fd.is_repeated and roll < 0.3:
        target = getattr(m, fd.name)
        if fd.type == FieldDescriptor.TYPE_MESSAGE:
            if len(target) and rng.random() < 0.5:
                target.add().CopyFrom(target[rng.randrange(len(target))])  # one twice
            else:
                _fill(target.add(), rng, vocab, _MAX_DEPTH - 1)
        elif len(target) and rng.random() < 0.5:
            target.append(target[rng.randrange(len(target))])
        else:
            target.append(_scalar(fd, rng, vocab))
    elif roll < 0.45 and (fd.is_repeated or fd.has_presence):
        m.ClearField(fd.name)
    else:
        _set(m, fd, rng, vocab, _MAX_DEPTH - 1)
    return out
