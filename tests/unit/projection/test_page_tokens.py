"""Page tokens come from clients: every crafted token is a BadPageToken (INVALID_ARGUMENT
bad_page_token), never an OverflowError, RecursionError or a database error (INTERNAL)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import Session

from famiglia.readmodels.db import make_engine
from famiglia.readmodels.queries import (
    INT64_MAX,
    BadPageToken,
    decode_token,
    encode_token,
    list_matches,
    player_history,
)
from famiglia.readmodels.tables import Match, metadata


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


CRAFTED = {
    "float beyond double": _b64(b'[1e400,"m"]'),
    "int beyond int64": _b64(b'[100000000000000000000000000000,"m"]'),
    "int64 + 1": _b64(f'[{INT64_MAX + 1},"m"]'.encode()),
    "negative": _b64(b'[-1,"m"]'),
    "NaN": _b64(b'[NaN,"m"]'),
    "Infinity": _b64(b'[Infinity,"m"]'),
    "float": _b64(b'[1.5,"m"]'),
    "bool": _b64(b'[true,"m"]'),
    "nulls": _b64(b"[null,null]"),
    "empty list": _b64(b"[]"),
    "three items": _b64(b'[1,"m",3]'),
    "object": _b64(b'{"a":1,"b":2}'),
    "number match id": _b64(b"[1,2]"),
    "empty match id": _b64(b'[1,""]'),
    "deep nesting": _b64(b"[" * 100_000 + b"]" * 100_000),
    "shallow nesting": _b64(b"[" * 300 + b"]" * 300),
    "long match id": _b64(json.dumps([1, "x" * 5000]).encode()),
    # JSON escapes a lone surrogate, which no UTF-8 (no database) can hold
    "lone surrogate match id": _b64(b'[1,"\\udc00"]'),
    "half a surrogate pair": _b64(b'[1,"m\\ud800"]'),
    "not utf-8": _b64(b"\xff\xfe\xfd"),
    "not base64": "!!!",
    "non-ascii": "\u00e9",
    "text": "not a token",
}


def test_tokens_we_hand_out_round_trip() -> None:
    for created_ms, match_id in [(0, "m"), (1_700_000_000_123, "m42"), (INT64_MAX, "z" * 64)]:
        assert decode_token(encode_token(created_ms, match_id)) == (created_ms, match_id)


@pytest.mark.parametrize("token", CRAFTED.values(), ids=CRAFTED.keys())
def test_a_crafted_token_is_a_bad_page_token(token: str) -> None:
    with pytest.raises(BadPageToken) as exc:
        decode_token(token)
    assert len(str(exc.value)) < 200  # a long token is not echoed whole


@pytest.fixture()
def session(tmp_path: Path) -> Iterator[Session]:
    engine = make_engine(f"sqlite:///{tmp_path / 'read.db'}")
    metadata.create_all(engine)
    with Session(engine) as s:
        s.add(Match(match_id="m1", game_id="grifters", seats=2, created_ms=5, last_event_ms=5, version=1, seed=1))
        s.commit()
        yield s


@pytest.mark.parametrize("token", CRAFTED.values(), ids=CRAFTED.keys())
def test_list_matches_and_player_history_refuse_a_crafted_token(session: Session, token: str) -> None:
    with pytest.raises(BadPageToken):
        list_matches(session, page_token=token)
    with pytest.raises(BadPageToken):
        player_history(session, "p1", page_token=token)


def test_the_largest_valid_token_pages_from_the_newest_match(session: Session) -> None:
    page = list_matches(session, page_token=encode_token(INT64_MAX, "zzz"))
    assert [m.match_id for m in page.matches] == ["m1"]
