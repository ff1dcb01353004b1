"""The protos keep their wire contract (protos/contract.json, tools/proto_contract.py).

Events stored for good (Redis, the SQL archive), players' exports and mobile clients in the
field were written against older protos: a renumbered, retyped or renamed field, a removed one
left unreserved, a removed message or RPC misreads or breaks them without a word. The check
must fail on each such change, naming file, message and field, and let additions through.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("proto_contract", ROOT / "tools" / "proto_contract.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("proto_contract", module)
    spec.loader.exec_module(module)
    return module


pc = _tool()

TOY_PATH = "famiglia/toy/v1/toy.proto"
TOY = """syntax = "proto3";
package famiglia.toy.v1;

enum Suit {
  SUIT_UNSPECIFIED = 0;
  SUIT_CLUBS = 1;
  SUIT_HEARTS = 2;
}

enum Mood {
  MOOD_UNSPECIFIED = 0;
}

message Card {
  string id = 1;
  Suit suit = 2;
  repeated int32 pips = 3;
  reserved 9, 13 to 15;
  reserved "gone";
}

message Note { string text = 1; }

message Event {
  oneof kind {
    Card card_drawn = 1;
    Card card_played = 2;
  }
  int32 seat = 3;
  optional int32 round = 4;
  map<string, string> options = 5;
  message Entry { string key = 1; string value = 2; }
}

service Toy {
  rpc Draw(Card) returns (Event);
  rpc Watch(Card) returns (stream Event);
}
"""


def _contract(tmp_path: Path, text: str, files: dict[str, str] | None = None) -> dict:
    """The contract protoc reads from `text` as the toy proto (plus any other files given)."""
    root = tmp_path / f"protos{len(list(tmp_path.glob('protos*')))}"
    for rel, body in {TOY_PATH: text, **(files or {})}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(body)
    return pc.current(root)


def _edit(old: str, new: str) -> str:
    assert old in TOY, old
    return TOY.replace(old, new, 1)


def _breaks(tmp_path: Path, edited: str) -> list[str]:
    return pc.breaking_changes(_contract(tmp_path, TOY), _contract(tmp_path, edited))


CARD = f"{TOY_PATH}: message famiglia.toy.v1.Card: "
EVENT = f"{TOY_PATH}: message famiglia.toy.v1.Event: "
SUIT = f"{TOY_PATH}: enum famiglia.toy.v1.Suit: "
TOY_RPC = f"{TOY_PATH}: service famiglia.toy.v1.Toy: "

BREAKING = {
    "renumbered field": (("Suit suit = 2;", "Suit suit = 6;"),
                         CARD + "field `suit` renumbered from 2 to 6"),
    "retyped field": (("string id = 1;", "int64 id = 1;"),
                      CARD + "field `id` (1) changed type from string to int64"),
    "message type changed": (("Card card_played = 2;", "Note card_played = 2;"),
                             EVENT + "field `card_played` (2) changed type from famiglia.toy.v1.Card to "
                                     "famiglia.toy.v1.Note"),
    "map made a repeated entry": (("map<string, string> options = 5;", "repeated Entry options = 5;"),
                                  EVENT + "field `options` (5) changed type from map<string, string> to "
                                          "famiglia.toy.v1.Event.Entry"),
    "repeated made singular": (("repeated int32 pips = 3;", "int32 pips = 3;"),
                               CARD + "field `pips` (3) changed cardinality from repeated to singular"),
    "optional made implicit": (("optional int32 round = 4;", "int32 round = 4;"),
                               EVENT + "field `round` (4) changed cardinality from optional to singular"),
    "field moved into a oneof": (("    Card card_played = 2;\n  }\n  int32 seat = 3;",
                                  "    Card card_played = 2;\n    int32 seat = 3;\n  }"),
                                 EVENT + "field `seat` (3) moved from no oneof to oneof kind"),
    "renamed field": (("string id = 1;", "string name = 1;"),
                      CARD + "field 1 renamed from `id` to `name` (exports and JSON clients name it; "
                             "the envelope's type names an Event's oneof field)"),
    "renamed event kind": (("Card card_drawn = 1;", "Card card_dealt = 1;"),
                           EVENT + "field 1 renamed from `card_drawn` to `card_dealt` (exports and JSON clients "
                                   "name it; the envelope's type names an Event's oneof field)"),
    "removed field": (("  repeated int32 pips = 3;\n", ""),
                      CARD + "field `pips` (3) removed without reserving it: add `reserved 3;` and "
                             "`reserved \"pips\";`"),
    "removed field, number reserved only": (("  repeated int32 pips = 3;\n", "  reserved 3;\n"),
                                            CARD + "field `pips` (3) removed without reserving it: add "
                                                   "`reserved 3;` and `reserved \"pips\";`"),
    "reservation dropped": (("reserved 9, 13 to 15;", "reserved 13 to 15;"),
                            CARD + "reservation 9 dropped (old records may carry it)"),
    "reserved range narrowed": (("reserved 9, 13 to 15;", "reserved 9, 13 to 14;"),
                                CARD + "reservation 13-15 dropped (old records may carry it)"),
    "reserved name dropped": (('  reserved "gone";\n', ""),
                              CARD + 'reservation "gone" dropped (old records may carry it)'),
    "renumbered enum value": (("SUIT_HEARTS = 2;", "SUIT_HEARTS = 3;"),
                              SUIT + "value SUIT_HEARTS renumbered from 2 to 3"),
    "renamed enum value": (("SUIT_HEARTS = 2;", "SUIT_HEART = 2;"),
                           SUIT + "value 2 renamed from SUIT_HEARTS to SUIT_HEART (exports and JSON clients name it)"),
    "removed enum value": (("  SUIT_HEARTS = 2;\n", ""),
                           SUIT + "value SUIT_HEARTS (2) removed without reserving it: add `reserved 2;` and "
                                  "`reserved \"SUIT_HEARTS\";`"),
    "removed message": (("message Note { string text = 1; }\n", ""),
                        f"{TOY_PATH}: message famiglia.toy.v1.Note removed (stored events, exports and clients "
                        f"name it)"),
    "removed enum": (("enum Mood {\n  MOOD_UNSPECIFIED = 0;\n}\n", ""),
                     f"{TOY_PATH}: enum famiglia.toy.v1.Mood removed (stored events, exports and clients name it)"),
    "removed rpc": (("  rpc Draw(Card) returns (Event);\n", ""),
                    TOY_RPC + "rpc Draw removed (deployed clients call it)"),
    "rpc request changed": (("rpc Draw(Card)", "rpc Draw(Note)"),
                            TOY_RPC + "rpc Draw changed from `famiglia.toy.v1.Card -> famiglia.toy.v1.Event` to "
                                      "`famiglia.toy.v1.Note -> famiglia.toy.v1.Event`"),
    "rpc no longer streams": (("returns (stream Event)", "returns (Event)"),
                              TOY_RPC + "rpc Watch changed from `famiglia.toy.v1.Card -> stream famiglia.toy.v1.Event`"
                                        " to `famiglia.toy.v1.Card -> famiglia.toy.v1.Event`"),
}


@pytest.mark.parametrize("case", sorted(BREAKING))
def test_a_breaking_change_is_named_by_file_message_and_field(tmp_path: Path, case: str) -> None:
    (old, new), expected = BREAKING[case]
    assert _breaks(tmp_path, _edit(old, new)) == [expected]


def test_a_removed_file_breaks_what_it_held(tmp_path: Path) -> None:
    old = _contract(tmp_path, TOY)
    gone = pc.breaking_changes(old, {})
    assert f"{TOY_PATH}: message famiglia.toy.v1.Card removed (stored events, exports and clients name it)" in gone
    assert f"{TOY_PATH}: service famiglia.toy.v1.Toy removed (stored events, exports and clients name it)" in gone


ADDITIONS = {
    "new field": (("repeated int32 pips = 3;", "repeated int32 pips = 3;\n  bool face_up = 4;"),
                  CARD.rstrip(" ") + " new fields face_up"),
    "new event kind": (("Card card_played = 2;", "Card card_played = 2;\n    Note note_passed = 6;"),
                       EVENT.rstrip(" ") + " new fields note_passed"),
    "new message": (("message Note {", "message Hand { repeated Card cards = 1; }\nmessage Note {"),
                    f"{TOY_PATH}: new message famiglia.toy.v1.Hand"),
    "new enum value": (("SUIT_HEARTS = 2;", "SUIT_HEARTS = 2;\n  SUIT_SPADES = 3;"),
                       SUIT.rstrip(" ") + " new values SUIT_SPADES"),
    "new rpc": (("rpc Draw(Card) returns (Event);", "rpc Draw(Card) returns (Event);\n  rpc Pass(Note) returns (Note);"),
                TOY_RPC.rstrip(" ") + " new rpcs Pass"),
    "field removed and reserved": (("  repeated int32 pips = 3;\n", "  reserved 3, 10 to 12;\n  reserved \"pips\";\n"),
                                   CARD.rstrip(" ") + " newly reserved 3, 10-12, pips"),
    "reservations widened": (("reserved 9, 13 to 15;", "reserved 8 to 10, 11 to 15, 20 to max;"),
                             CARD.rstrip(" ") + " newly reserved 8-10, 11-15, 20-536870911"),
    "enum value removed and reserved": (("  SUIT_HEARTS = 2;\n", "  reserved 2;\n  reserved \"SUIT_HEARTS\";\n"),
                                        SUIT.rstrip(" ") + " newly reserved 2, SUIT_HEARTS"),
}


@pytest.mark.parametrize("case", sorted(ADDITIONS))
def test_an_addition_breaks_nothing_and_is_listed_to_record(tmp_path: Path, case: str) -> None:
    (old, new), expected = ADDITIONS[case]
    before, after = _contract(tmp_path, TOY), _contract(tmp_path, _edit(old, new))
    assert pc.breaking_changes(before, after) == []
    assert pc.unrecorded(before, after) == [expected]
    assert pc.unrecorded(after, after) == []


def test_a_message_moved_to_another_file_of_its_package_keeps_its_name_on_the_wire(tmp_path: Path) -> None:
    note = 'syntax = "proto3";\npackage famiglia.toy.v1;\nmessage Note { string text = 1; }\n'
    before = _contract(tmp_path, TOY)
    after = _contract(tmp_path, _edit("message Note { string text = 1; }\n", ""),
                      {"famiglia/toy/v1/note.proto": note})
    assert pc.breaking_changes(before, after) == []
    assert pc.unrecorded(before, after) == ["famiglia/toy/v1/note.proto: new file",
                                            "famiglia/toy/v1/note.proto: new message famiglia.toy.v1.Note"]


def test_the_snapshot_reads_like_the_protos(tmp_path: Path) -> None:
    """One line a field, as it is declared: the snapshot is reviewed in diffs."""
    toy = _contract(tmp_path, TOY)[TOY_PATH]
    assert toy["messages"]["famiglia.toy.v1.Event"]["fields"] == {
        "card_drawn": "1 famiglia.toy.v1.Card oneof kind",
        "card_played": "2 famiglia.toy.v1.Card oneof kind",
        "seat": "3 int32",
        "round": "4 optional int32",
        "options": "5 map<string, string>",
    }
    assert toy["messages"]["famiglia.toy.v1.Card"]["reserved"] == ["9", "13-15", "gone"]
    assert toy["enums"]["famiglia.toy.v1.Suit"] == {"values": {"SUIT_UNSPECIFIED": 0, "SUIT_CLUBS": 1,
                                                               "SUIT_HEARTS": 2}}
    assert toy["services"]["famiglia.toy.v1.Toy"]["Watch"] == "famiglia.toy.v1.Card -> stream famiglia.toy.v1.Event"
    for text in toy["messages"]["famiglia.toy.v1.Event"]["fields"].values():
        assert pc.Field.parse(text).text() == text


def test_update_records_additions_and_refuses_a_break(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    protos, snapshot = tmp_path / "protos", tmp_path / "contract.json"
    (protos / TOY_PATH).parent.mkdir(parents=True)
    (protos / TOY_PATH).write_text(TOY)
    args = ["--protos", str(protos), "--snapshot", str(snapshot)]

    assert pc.main(args) == 1  # nothing recorded yet
    assert "once they are final, run `make protos-contract`" in capsys.readouterr().out
    assert pc.main([*args, "--update"]) == 0
    assert pc.main(args) == 0
    recorded = snapshot.read_text()
    assert json.loads(recorded) == pc.current(protos)

    (protos / TOY_PATH).write_text(_edit("Suit suit = 2;", "Suit suit = 6;"))
    capsys.readouterr()
    assert pc.main(args) == 1
    out = capsys.readouterr().out
    assert CARD + "field `suit` renumbered from 2 to 6" in out and "docs/schema.md" in out
    assert pc.main([*args, "--update"]) == 1
    assert snapshot.read_text() == recorded, "a break is never recorded"
    assert pc.main([*args, "--remind"]) == 0  # `make protos` says it, and goes on
    assert "renumbered" in capsys.readouterr().out


def test_todays_protos_keep_their_recorded_wire_contract() -> None:
    recorded = json.loads((ROOT / "protos" / "contract.json").read_text())
    now = pc.current()
    breaks = pc.breaking_changes(recorded, now)
    assert not breaks, "the protos break protos/contract.json (docs/schema.md):\n" + "\n".join(breaks)
    added = pc.unrecorded(recorded, now)
    assert not added, "protos/contract.json lacks these additions: run `make protos-contract`\n" + "\n".join(added)
    assert now == recorded


def test_every_enum_starts_at_its_unspecified_zero() -> None:
    """A field never set reads as 0: that must mean "not said", not a real value (a client
    built before a value existed also reads an unknown one as 0 in some languages)."""
    enums = {name: e for f in pc.current().values() for name, e in f["enums"].items()}
    assert len(enums) >= 15, sorted(enums)
    for name, enum in enums.items():
        short = name.rsplit(".", 1)[1]
        want = re.sub(r"(?<!^)(?=[A-Z])", "_", short).upper() + "_UNSPECIFIED"
        first, number = next(iter(enum["values"].items()))
        assert (first, number) == (want, 0), f"{name} starts with {first} = {number}, not {want} = 0"
