"""The bench starts its own services on plaintext loopback addresses and dials them so: an
operator's transport settings (FAMIGLIA_TLS_CERT/KEY/CA, kept in the shell to reach a
deployment with the CLI, and FAMIGLIA_HEALTH_ADDR) must not reach them. They did: the
command service then served TLS only and the bench waited for it until it gave up."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from famiglia.bench.core import command_service
from famiglia.bench.projection import projection_service
from famiglia.bench.tournament import _env
from famiglia.client import GameClient
from famiglia.grpcutil import tls
from famiglia.localstack.redis_server import free_port
from tests.support.certs import CertificateAuthority


@pytest.fixture()
def operator_shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The transport settings of an operator who reaches a mutual-TLS deployment from here."""
    ca = CertificateAuthority(tmp_path)
    pair = ca.issue("operator")
    settings = {tls.CERT: str(pair.cert), tls.KEY: str(pair.key), tls.CA: str(ca.ca),
                tls.HEALTH_ADDR: f"127.0.0.1:{free_port()}"}
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    return settings


def test_the_bench_command_service_serves_plaintext_whatever_the_shell_sets(
        redis_url: str, operator_shell: dict[str, str]) -> None:
    with command_service(redis_url) as address:
        client = GameClient(address, timeout=10)
        try:
            assert {game.game_id for game in client.list_games()}
        finally:
            client.close()


def test_the_bench_projection_service_serves_plaintext_whatever_the_shell_sets(
        redis_url: str, operator_shell: dict[str, str], tmp_path: Path) -> None:
    with projection_service(redis_url, tmp_path / "bench.db") as proc:
        assert proc.poll() is None  # serving: it answered the bench's plaintext channel


def test_the_bench_stack_is_started_without_the_shells_transport_settings(
        operator_shell: dict[str, str]) -> None:
    """`private_stack` hands its services this process's environment (`Stack.env`)."""
    with _env({"FAMIGLIA_SECRET": "bench"}, unset=tls.SETTINGS):
        assert not {name for name in tls.SETTINGS if name in os.environ}
        assert os.environ["FAMIGLIA_SECRET"] == "bench"
    assert {name: os.environ.get(name) for name in operator_shell} == operator_shell  # given back after
