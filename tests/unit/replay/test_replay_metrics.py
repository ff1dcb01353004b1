"""The replay service's metrics: exports, imports and verifications by result."""

from __future__ import annotations

import pytest

from famiglia.eventstore.memory_store import InMemoryEventStore
from famiglia.grpcutil.errors import AlreadyExists, NotFound
from famiglia.replay.export import dump, load
from tests.support.metrics import recorded

from .test_app import SIGNER, TOY, _app, _stored


def test_exports_imports_and_verifications_are_counted_by_result() -> None:
    store, envelopes = _stored(TOY)
    match_id = envelopes[0].match_id
    with recorded() as seen:
        app, other = _app(store), _app(InMemoryEventStore())
        data = dump(app.export(match_id))
        with pytest.raises(NotFound):
            app.export("m-nowhere")
        assert app.verify_match(match_id).ok
        tampered = load(data)
        tampered.events[20].payload += b"\x08\x01"
        assert not app.verify_file(dump(tampered)).ok
        op = SIGNER.operator_token()
        other.import_file(data, token=op)
        with pytest.raises(AlreadyExists):
            other.import_file(data, token=op)
        other.import_file(dump(tampered), token=op, new_match_id="m-tampered", allow_unverified=True)
    assert seen.value("famiglia.replay.exports", result="ok") == 1
    assert seen.value("famiglia.replay.exports", result="refused") == 1
    assert seen.value("famiglia.replay.verifications", result="ok") == 1
    assert seen.value("famiglia.replay.verifications", result="diverged") == 1
    assert seen.value("famiglia.replay.imports", result="ok") == 1
    assert seen.value("famiglia.replay.imports", result="refused") == 1
    assert seen.value("famiglia.replay.imports", result="unverified") == 1
