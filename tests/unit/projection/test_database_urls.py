"""FAMIGLIA_DATABASE_URL's PostgreSQL spellings all mean psycopg 3 (psycopg2 is not a dependency)."""

from __future__ import annotations

import pytest

from famiglia.readmodels.db import is_sqlite, normalize_url


@pytest.mark.parametrize("url", ["postgres://u:p@db:5432/f", "postgresql://u:p@db:5432/f",
                                 "POSTGRES://u:p@db:5432/f", "PostgreSQL://u:p@db:5432/f"])
def test_every_postgresql_spelling_means_psycopg_3(url: str) -> None:
    """A scheme is case-insensitive (RFC 3986): the settings check passed `POSTGRES://`, and the
    engine then looked for psycopg2, which is not installed."""
    assert normalize_url(url) == "postgresql+psycopg://u:p@db:5432/f"


def test_other_urls_are_left_as_they_are() -> None:
    for url in ("sqlite:///var/famiglia.db", "postgresql+psycopg://u@db/f", "sqlite://"):
        assert normalize_url(url) == url
    assert is_sqlite("sqlite://") and not is_sqlite("POSTGRES://u@db/f")
