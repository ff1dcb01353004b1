"""Alembic environment of the projection's read models.

Run through `services.projection.schema.upgrade(engine)` (the service calls it
at start), which hands over a connection in `config.attributes["connection"]`.
The version table is the projection's own, so other services may keep their
migrations in the same database.
"""

from __future__ import annotations

from alembic import context

from famiglia.readmodels.tables import metadata

VERSION_TABLE = "projection_alembic_version"


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is None:
        from famiglia.readmodels.db import make_engine

        url = context.config.get_main_option("sqlalchemy.url")
        if not url:
            raise RuntimeError("set sqlalchemy.url or pass a connection")
        with make_engine(url).connect() as conn:
            _run(conn)
        return
    _run(connection)


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError("offline migrations are not supported; run against a database")
run_migrations_online()
