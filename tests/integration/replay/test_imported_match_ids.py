"""ImportMatch admits the match ids the projection's tables hold (64 characters): an imported
match is archived and listed like any match, on PostgreSQL too (before, ids of up to 128 were
admitted, and such a match was parked by the projection, never archived nor listed)."""

from __future__ import annotations

import pytest

from famiglia.config import Settings
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.grpcutil.errors import InvalidArgument
from famiglia.replay.export import build_export, dump
from famiglia.replay.sources import MemorySource
from services.replay.bootstrap import ReplaySettings
from services.replay.bootstrap import bootstrap as replay_bootstrap
from tests.support.postgres import postgres_database, postgres_server, postgres_url  # noqa: F401
from tests.unit.replay.games import copy, recorded, registry

readmodels = pytest.importorskip("famiglia.readmodels")
SECRET = "unit-test-secret"


def test_an_imported_match_with_an_admitted_id_is_archived_on_postgres(redis_url: str, postgres_url: str) -> None:  # noqa: F811
    from famiglia.auth import TokenSigner
    from services.projection.bootstrap import bootstrap as projection_bootstrap

    store = RedisEventStore.connect(redis_url)
    try:
        app = replay_bootstrap(store=store, cold=MemorySource(), registry=registry(),
                               settings=Settings(secret=SECRET), replay_settings=ReplaySettings(), use_archive=False)
        data = dump(build_export(registry(), copy(recorded("replay_toy", 5))), binary=True)
        with pytest.raises(InvalidArgument) as refused:  # longer than the tables hold
            app.import_file(data, token=TokenSigner(SECRET).operator_token(), new_match_id="m" + "x" * 64)
        assert refused.value.code == "bad_match_id"
        match_id = "m" + "x" * 63  # 64 characters: admitted
        app.import_file(data, token=TokenSigner(SECRET).operator_token(), new_match_id=match_id)
        version = store.version(match_id)
        sql = readmodels.make_engine(postgres_url)
        projection = projection_bootstrap(store=store, sql=sql, registry=registry(),
                                          settings=Settings(secret="x", redis_url=redis_url))
        runner = projection.runner("c1")
        archived = 0
        for _ in range(60):
            runner.run_once(block_ms=50)
            with readmodels.read_session(projection.sql) as session:
                archived = readmodels.archived_version(session, match_id)
            if archived == version:
                break
        projection.sql.dispose()
        assert archived == version, f"archived {archived} of {version} events of an admitted import"
    finally:
        store.close()
