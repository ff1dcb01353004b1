"""The protos' wire contract, recorded in protos/contract.json, and the check that keeps it
(`buf breaking`'s idea, with no buf binary: built from protoc's descriptors).

Stored events (Redis, the SQL archive), players' exports and clients in the field were all
written against older protos. They keep reading and being read only while every field keeps
its number, name, type, cardinality and oneof, every enum value its name and number, every
message, enum and RPC stays, and what was removed stays reserved. Additions are free, and are
recorded so that they are kept from then on. docs/schema.md says what counts and why.

    python tools/proto_contract.py            fail on a breaking change or an unrecorded addition
    python tools/proto_contract.py --update   record additions (`make protos-contract`); refuses a break
    python tools/proto_contract.py --remind   say what `--update` would, never fail (`make protos`)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from google.protobuf import descriptor_pb2

ROOT = Path(__file__).resolve().parents[1]
PROTOS = ROOT / "protos"
SNAPSHOT = PROTOS / "contract.json"

FDP = descriptor_pb2.FieldDescriptorProto
_SCALARS = {value: name.removeprefix("TYPE_").lower() for name, value in FDP.Type.items()}
_LABELS = {FDP.LABEL_REPEATED: "repeated", FDP.LABEL_REQUIRED: "required"}


# ---------------------------------------------------------------- the contract of descriptors


class Field(NamedTuple):
    """One field as it travels: `3 optional int32`, `2 repeated famiglia.v1.SeatInfo`,
    `11 map<string, string>`, `1 famiglia.grifters.v1.PullCaper oneof kind`."""

    number: int
    cardinality: str  # "" (proto3's implicit presence), optional, repeated, required
    type: str
    oneof: str = ""

    def text(self) -> str:
        words = [str(self.number), self.cardinality, self.type, *(("oneof", self.oneof) if self.oneof else ())]
        return " ".join(w for w in words if w)

    @classmethod
    def parse(cls, text: str) -> Field:
        words = text.split(" ")
        oneof = ""
        if len(words) > 2 and words[-2] == "oneof":
            oneof, words = words[-1], words[:-2]
        number, rest = int(words[0]), words[1:]
        cardinality = rest.pop(0) if rest[0] in ("optional", "repeated", "required") else ""
        return cls(number, cardinality, " ".join(rest), oneof)


def contract(files: Iterable[descriptor_pb2.FileDescriptorProto]) -> dict:
    """The wire contract of these files: per file, its messages' fields and reservations, its
    enums' values and reservations and its services' RPCs, keyed by full name."""
    return {f.name: _file_contract(f) for f in sorted(files, key=lambda f: f.name)}


def _file_contract(f: descriptor_pb2.FileDescriptorProto) -> dict:
    messages: dict[str, dict] = {}
    enums: dict[str, dict] = {}
    maps: dict[str, str] = {}
    prefix = f.package + "." if f.package else ""
    for m in f.message_type:
        _collect_maps(m, prefix, maps)
    proto2 = (f.syntax or "proto2") == "proto2"
    for m in f.message_type:
        _message(m, prefix, messages, enums, maps, proto2)
    for e in f.enum_type:
        enums[prefix + e.name] = _enum(e)
    services = {
        prefix + s.name: {
            m.name: f"{'stream ' if m.client_streaming else ''}{_name(m.input_type)} -> "
                    f"{'stream ' if m.server_streaming else ''}{_name(m.output_type)}"
            for m in s.method
        }
        for s in f.service
    }
    return {"syntax": f.syntax or "proto2", "messages": dict(sorted(messages.items())),
            "enums": dict(sorted(enums.items())), "services": services}


def _collect_maps(m: descriptor_pb2.DescriptorProto, prefix: str, maps: dict[str, str]) -> None:
    """A map field is a repeated entry message protoc makes up: it is written `map<K, V>`."""
    full = prefix + m.name
    for nested in m.nested_type:
        if nested.options.map_entry:
            key, value = nested.field
            maps[full + "." + nested.name] = f"map<{_type(key, maps)}, {_type(value, maps)}>"
        else:
            _collect_maps(nested, full + ".", maps)


def _message(m: descriptor_pb2.DescriptorProto, prefix: str, messages: dict, enums: dict,
             maps: dict[str, str], proto2: bool) -> None:
    full = prefix + m.name
    fields = {}
    for fd in m.field:
        oneof = ""
        if fd.HasField("oneof_index") and not fd.proto3_optional:  # proto3 `optional` is a synthetic oneof
            oneof = m.oneof_decl[fd.oneof_index].name
        cardinality = _LABELS.get(fd.label, "")
        if fd.proto3_optional or (proto2 and not cardinality and not oneof):
            cardinality = "optional"  # explicit presence (HasField)
        typ = _type(fd, maps)
        if typ.startswith("map<"):
            cardinality = ""
        fields[fd.name] = Field(fd.number, cardinality, typ, oneof).text()
    reserved = [_span(r.start, r.end - 1) for r in m.reserved_range] + list(m.reserved_name)
    messages[full] = {"fields": fields, **({"reserved": reserved} if reserved else {})}
    for nested in m.nested_type:
        if not nested.options.map_entry:
            _message(nested, full + ".", messages, enums, maps, proto2)
    for e in m.enum_type:
        enums[full + "." + e.name] = _enum(e)


def _enum(e: descriptor_pb2.EnumDescriptorProto) -> dict:
    values = {v.name: v.number for v in e.value}
    reserved = [_span(r.start, r.end) for r in e.reserved_range] + list(e.reserved_name)
    return {"values": values, **({"reserved": reserved} if reserved else {})}


def _span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def _name(type_name: str) -> str:
    return type_name.removeprefix(".")


def _type(fd: descriptor_pb2.FieldDescriptorProto, maps: dict[str, str]) -> str:
    if fd.type in (FDP.TYPE_MESSAGE, FDP.TYPE_ENUM, FDP.TYPE_GROUP):
        name = _name(fd.type_name)
        return maps.get(name, name)
    return _SCALARS[fd.type]


# ---------------------------------------------------------------- comparing two contracts


def breaking_changes(old: dict, new: dict) -> list[str]:
    """What `new` breaks of `old`, one readable line each (file, message or enum, field or value)."""
    out: list[str] = []
    found = _index(new)
    for path, f in old.items():
        if path in new and new[path]["syntax"] != f["syntax"]:
            out.append(f"{path}: syntax changed from {f['syntax']} to {new[path]['syntax']}")
        for kind in ("messages", "enums", "services"):
            for name, was in f[kind].items():
                where = found[kind].get(name)
                noun = kind[:-1]
                if where is None:
                    out.append(f"{path}: {noun} {name} removed (stored events, exports and clients name it)")
                    continue
                compare = {"messages": _message_breaks, "enums": _enum_breaks, "services": _service_breaks}[kind]
                out += [f"{path}: {noun} {name}: {line}" for line in compare(was, where[1])]
    return out


def unrecorded(old: dict, new: dict) -> list[str]:
    """What `new` has that the recorded contract `old` lacks: additions to record."""
    out: list[str] = []
    out += [f"{path}: file gone (what it held lives on in other files)" for path in old if path not in new]
    for path, f in new.items():
        was = old.get(path, {"messages": {}, "enums": {}, "services": {}})
        if path not in old:
            out.append(f"{path}: new file")
        for kind, members in (("messages", "fields"), ("enums", "values"), ("services", None)):
            for name, now in f[kind].items():
                before = was[kind].get(name)
                if before is None:
                    out.append(f"{path}: new {kind[:-1]} {name}")
                    continue
                inner_now = now[members] if members else now
                inner_before = before[members] if members else before
                added = [k for k in inner_now if k not in inner_before]
                if added:
                    out.append(f"{path}: {kind[:-1]} {name}: new {members or 'rpcs'} {', '.join(added)}")
                reserved = [r for r in now.get("reserved", []) if r not in before.get("reserved", [])]
                if members and reserved:
                    out.append(f"{path}: {kind[:-1]} {name}: newly reserved {', '.join(reserved)}")
    return out


def _index(c: dict) -> dict[str, dict[str, tuple[str, dict]]]:
    """Messages, enums and services by full name, with their file: one moved to another file of
    its package keeps its full name, which is what the wire and `Any` know it by."""
    out: dict[str, dict[str, tuple[str, dict]]] = {"messages": {}, "enums": {}, "services": {}}
    for path, f in c.items():
        for kind in out:
            for name, body in f[kind].items():
                out[kind][name] = (path, body)
    return out


def _reserved(reserved: list[str]) -> tuple[set[str], list[tuple[int, int]]]:
    names, spans = set(), []
    for r in reserved:
        if r[0].isdigit():
            first, _, last = r.partition("-")
            spans.append((int(first), int(last or first)))
        else:
            names.add(r)
    return names, spans


def _covered(first: int, last: int, spans: list[tuple[int, int]]) -> bool:
    """Whether `spans` reserve every number from `first` to `last` (`reserved 5 to max` is a
    span of half a billion: no number by number)."""
    for a, b in sorted(spans):
        if a > first:
            return False
        if b >= first:
            first = b + 1
            if first > last:
                return True
    return first > last


def _is_reserved(number: int, name: str, reserved: list[str]) -> tuple[bool, bool]:
    names, spans = _reserved(reserved)
    return _covered(number, number, spans), name in names


def _reservations_kept(was: list[str], now: list[str]) -> list[str]:
    names, spans = _reserved(now)
    lost = []
    for r in was:
        if r[0].isdigit():
            first, _, last = r.partition("-")
            if not _covered(int(first), int(last or first), spans):
                lost.append(r)
        elif r not in names:
            lost.append(f'"{r}"')
    return [f"reservation {r} dropped (old records may carry it)" for r in lost]


def _message_breaks(was: dict, now: dict) -> list[str]:
    out = []
    by_number = {Field.parse(t).number: (n, Field.parse(t)) for n, t in now["fields"].items()}
    for name, text in was["fields"].items():
        old = Field.parse(text)
        if old.number in by_number:
            new_name, new = by_number[old.number]
            if new_name != name:
                out.append(f"field {old.number} renamed from `{name}` to `{new_name}` (exports and JSON "
                           f"clients name it; the envelope's type names an Event's oneof field)")
        elif name in now["fields"]:
            out.append(f"field `{name}` renumbered from {old.number} to {Field.parse(now['fields'][name]).number}")
            continue
        else:
            number_kept, name_kept = _is_reserved(old.number, name, now.get("reserved", []))
            if not (number_kept and name_kept):
                out.append(f"field `{name}` ({old.number}) removed without reserving it: add "
                           f"`reserved {old.number};` and `reserved \"{name}\";`")
            continue
        if new.type != old.type:
            out.append(f"field `{name}` ({old.number}) changed type from {old.type} to {new.type}")
        if _cardinality(new) != _cardinality(old):
            out.append(f"field `{name}` ({old.number}) changed cardinality from {_cardinality(old)} "
                       f"to {_cardinality(new)}")
        if new.oneof != old.oneof:
            out.append(f"field `{name}` ({old.number}) moved from {_oneof(old.oneof)} to {_oneof(new.oneof)}")
    return out + _reservations_kept(was.get("reserved", []), now.get("reserved", []))


def _cardinality(f: Field) -> str:
    """A map is a repeated field of entries on the wire."""
    return "repeated" if f.type.startswith("map<") else f.cardinality or "singular"


def _oneof(name: str) -> str:
    return f"oneof {name}" if name else "no oneof"


def _enum_breaks(was: dict, now: dict) -> list[str]:
    out = []
    by_number: dict[int, list[str]] = {}
    for n, v in now["values"].items():
        by_number.setdefault(v, []).append(n)
    for name, number in was["values"].items():
        if name in now["values"]:
            if now["values"][name] != number:
                out.append(f"value {name} renumbered from {number} to {now['values'][name]}")
        elif number in by_number:
            out.append(f"value {number} renamed from {name} to {'/'.join(by_number[number])} "
                       f"(exports and JSON clients name it)")
        else:
            number_kept, name_kept = _is_reserved(number, name, now.get("reserved", []))
            if not (number_kept and name_kept):
                out.append(f"value {name} ({number}) removed without reserving it: add `reserved {number};` "
                           f"and `reserved \"{name}\";`")
    return out + _reservations_kept(was.get("reserved", []), now.get("reserved", []))


def _service_breaks(was: dict, now: dict) -> list[str]:
    out = []
    for rpc, signature in was.items():
        if rpc not in now:
            out.append(f"rpc {rpc} removed (deployed clients call it)")
        elif now[rpc] != signature:
            out.append(f"rpc {rpc} changed from `{signature}` to `{now[rpc]}`")
    return out


# ---------------------------------------------------------------- protoc and the snapshot file


def current(protos: Path = PROTOS) -> dict:
    """The contract of the .proto files under `protos`, as protoc reads them."""
    import grpc_tools
    from grpc_tools import protoc

    include = Path(grpc_tools.__file__).parent / "_proto"
    files = [str(p.relative_to(protos)) for p in sorted(protos.rglob("*.proto"))]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "protos.binpb"
        if protoc.main(["protoc", f"-I{protos}", f"-I{include}", f"--descriptor_set_out={out}", *files]) != 0:
            raise SystemExit("protoc failed")
        fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return contract(fds.file)


def dump(c: dict) -> str:
    return json.dumps(c, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--update", action="store_true", help="record additions; refuse a breaking change")
    mode.add_argument("--remind", action="store_true", help="say what is unrecorded or breaking, exit 0")
    parser.add_argument("--protos", type=Path, default=PROTOS, help=argparse.SUPPRESS)
    parser.add_argument("--snapshot", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    snapshot: Path = args.snapshot or args.protos / "contract.json"
    shown = snapshot.relative_to(ROOT) if snapshot.is_relative_to(ROOT) else snapshot
    now = current(args.protos)
    old = json.loads(snapshot.read_text()) if snapshot.exists() else {}
    breaks = breaking_changes(old, now)
    added = unrecorded(old, now)
    if breaks:
        print(f"the protos break their recorded wire contract ({shown}):")
        print("\n".join(f"  {line}" for line in breaks))
        print("stored events, exports and deployed clients depend on it: see docs/schema.md")
        return 0 if args.remind else 1
    if now == old:
        return 0
    added = added or ["the recorded contract differs (a message moved between files?)"]
    if args.update:
        snapshot.write_text(dump(now))
        print(f"{shown}: recorded {len(added)} addition(s); commit it with the protos")
        return 0
    print(f"{shown} does not record these additions yet:")
    print("\n".join(f"  {line}" for line in added))
    print("once they are final, run `make protos-contract` and commit the snapshot")
    return 0 if args.remind else 1


if __name__ == "__main__":
    sys.exit(main())
