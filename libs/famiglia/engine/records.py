"""Fast copies of frozen dataclass records whose fields live in their instance dict.

Engines copy a state (or one player's record) for every event they fold, so the generic
`dataclasses.replace` (keyword binding, field checks, the frozen `__init__`) dominates a
replay. These copy the instance dict (one C call), update it and hand it to a bare
instance. A name that is no field makes the dict longer than the field count: one length
check instead of a subset test per copy. The classes must not have slots.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any


def dict_setter(cls: type) -> Callable[[Any, dict[str, Any]], None]:
    """The class's own `__dict__` setter: called straight, it skips the attribute look-up that
    `object.__setattr__(obj, "__dict__", d)` makes on every copy."""
    for klass in cls.__mro__:
        if "__dict__" in klass.__dict__:
            return klass.__dict__["__dict__"].__set__  # type: ignore[no-any-return]
    raise TypeError(f"{cls.__name__} instances have no __dict__")


def dict_copier(cls: type, drop: str | None = None) -> Callable[[Any, dict[str, Any]], Any]:
    """`dataclasses.replace(obj, **changes)` with the changes in a dict. `drop`: an attribute
    that is no field (e.g. a memo link) which the copy must not inherit."""
    if "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__} has slots: its fields are not in an instance dict")
    names = frozenset(f.name for f in fields(cls))
    count = len(names)
    new = object.__new__
    set_dict = dict_setter(cls)

    def copy_with(obj: Any, changes: dict[str, Any]) -> Any:
        d = obj.__dict__.copy()
        if drop is not None and drop in d:
            del d[drop]
        d.update(changes)
        if len(d) != count:
            raise TypeError(f"{cls.__name__} has no field(s) {sorted(changes.keys() - names)}")
        out: Any = new(cls)
        set_dict(out, d)
        return out

    return copy_with


def tuple_placer(cls: type) -> Callable[[tuple[Any, ...], int, dict[str, Any]], tuple[Any, ...]]:
    """A copier of one record of a tuple (most events change one player): the tuple with the
    record at `index` copied with `changes`, in one call."""
    names = frozenset(f.name for f in fields(cls))
    count = len(names)
    new, set_dict = object.__new__, dict_setter(cls)

    def place(records: tuple[Any, ...], index: int, changes: dict[str, Any]) -> tuple[Any, ...]:
        d = records[index].__dict__.copy()
        d.update(changes)
        if len(d) != count:
            raise TypeError(f"{cls.__name__} has no field(s) {sorted(changes.keys() - names)}")
        record: Any = new(cls)
        set_dict(record, d)
        out = list(records)
        out[index] = record
        return tuple(out)

    return place
