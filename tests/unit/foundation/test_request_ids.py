"""Creation request ids keyed with a service's secret (famiglia.auth.request_ids)."""

from __future__ import annotations

import pytest

from famiglia.auth.request_ids import private_request_id


def test_a_private_request_id_is_repeatable_with_the_secret_and_differs_without_it() -> None:
    public = "mm:p-some-table"
    assert private_request_id("s3cret", public) == private_request_id("s3cret", public)
    assert private_request_id("another", public) != private_request_id("s3cret", public)
    assert public not in private_request_id("s3cret", public)
    assert private_request_id("s3cret", "mm:p-other-table") != private_request_id("s3cret", public)


def test_no_secret_no_private_id() -> None:
    with pytest.raises(ValueError):
        private_request_id("", "t1:0")
