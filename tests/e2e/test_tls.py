"""The command service over TLS (FAMIGLIA_TLS_*), against a real redis-server, with a CA and
certificates made for the test: players send their seat tokens on every call, so a server
reachable beyond loopback must be able to serve TLS, and the SDK, the CLI and the services'
own clients to dial it (`grpcs://`). Every server listened in plaintext only; a certificate,
once read at start, took a restart to renew."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from famiglia.client import GameClient
from famiglia.config import Settings
from famiglia.eventstore.redis_store import RedisEventStore
from famiglia.grpcutil import tls
from famiglia.localstack.redis_server import free_port
from services.command.bootstrap import bootstrap
from services.command.entrypoints.grpc_server import serve
from tests.support.certs import CertificateAuthority, Pair
from tests.support.processes import start_service

from .conftest import SECRET, match_and_first_move

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
SERVING = health_pb2.HealthCheckResponse.SERVING


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[CertificateAuthority, Pair, CertificateAuthority]:
    """The deployment's CA and the command service's pair, and a CA nobody here trusts."""
    ca = CertificateAuthority(tmp_path_factory.mktemp("pki"))
    return ca, ca.issue("command"), CertificateAuthority(tmp_path_factory.mktemp("other"), "stranger")


def _serve(redis_url: str, transport: tls.Transport) -> Iterator[int]:
    store = RedisEventStore.connect(redis_url)
    app = bootstrap(store=store, settings=Settings(redis_url=redis_url, secret=SECRET))
    server, port = serve(app, "127.0.0.1:0", workers=8, transport=transport)
    server.start()
    try:
        yield port
    finally:
        server.stop(grace=None)
        store.close()


@pytest.fixture()
def tls_port(redis_url: str, pki) -> Iterator[int]:  # type: ignore[no-untyped-def]
    ca, pair, _ = pki
    yield from _serve(redis_url, tls.transport({tls.CERT: str(pair.cert), tls.KEY: str(pair.key)}))


def _client(address: str, monkeypatch: pytest.MonkeyPatch, **env: object) -> GameClient:
    for name in tls.SETTINGS:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, str(value))
    return GameClient(address, timeout=10)


def _refused(client: GameClient) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        client.list_games()
    client.close()
    return caught.value


def test_a_client_trusting_the_ca_plays_over_tls(tls_port: int, pki, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    ca, _, _ = pki
    client = _client(f"grpcs://localhost:{tls_port}", monkeypatch, FAMIGLIA_TLS_CA=ca.ca)
    try:
        match, me, command = match_and_first_move(client, seed=7)
        answer = me.submit(command)  # the seat token travels in the TLS session
        assert answer.version > match.version
        assert client.spectator(match.match_id).view().version == answer.version
    finally:
        client.close()


def test_a_plaintext_client_gets_nothing_from_a_tls_port(tls_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    error = _refused(_client(f"127.0.0.1:{tls_port}", monkeypatch))
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error


@pytest.mark.parametrize("roots", ["system", "stranger"])
def test_a_client_not_trusting_the_ca_is_refused(tls_port: int, pki, monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
                                                 roots: str) -> None:
    """A certificate the client cannot trust (no system root signed it; another private CA)
    ends the handshake: nothing, a token least of all, is sent."""
    _, _, stranger = pki
    env = {} if roots == "system" else {"FAMIGLIA_TLS_CA": stranger.ca}
    error = _refused(_client(f"grpcs://localhost:{tls_port}", monkeypatch, **env))
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error


@pytest.fixture()
def mutual_port(redis_url: str, pki) -> Iterator[int]:  # type: ignore[no-untyped-def]
    ca, pair, _ = pki
    yield from _serve(redis_url, tls.transport({tls.CERT: str(pair.cert), tls.KEY: str(pair.key),
                                                tls.CLIENT_CA: str(ca.ca)}))


def test_mutual_tls_takes_a_client_certificate_of_its_ca_only(mutual_port: int, pki,  # type: ignore[no-untyped-def]
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A service's own clients (bots, matchmaking -> command) and the CLI show FAMIGLIA_TLS_CLIENT_CERT/KEY;
    a server pair in the same environment (FAMIGLIA_TLS_CERT/KEY) is never shown."""
    ca, _, stranger = pki
    address = f"grpcs://localhost:{mutual_port}"
    error = _refused(_client(address, monkeypatch, FAMIGLIA_TLS_CA=ca.ca))
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error
    outsider = stranger.issue("outsider")
    error = _refused(_client(address, monkeypatch, FAMIGLIA_TLS_CA=ca.ca,
                             FAMIGLIA_TLS_CLIENT_CERT=outsider.cert, FAMIGLIA_TLS_CLIENT_KEY=outsider.key))
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error
    bots = ca.issue("bots")
    error = _refused(_client(address, monkeypatch, FAMIGLIA_TLS_CA=ca.ca,
                             FAMIGLIA_TLS_CERT=bots.cert, FAMIGLIA_TLS_KEY=bots.key))
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error  # a server's pair is not a client's
    client = _client(address, monkeypatch, FAMIGLIA_TLS_CA=ca.ca, FAMIGLIA_TLS_CLIENT_CERT=bots.cert,
                     FAMIGLIA_TLS_CLIENT_KEY=bots.key)
    try:
        match, me, command = match_and_first_move(client, seed=8)
        assert me.submit(command).version > match.version
    finally:
        client.close()


def _health(address: str, service: str = "") -> int:
    channel = grpc.insecure_channel(address)
    try:
        return health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=10).status
    finally:
        channel.close()


def _on_a_free_probes_port(start: Callable[[str], T]) -> tuple[str, T]:
    """`start(probes address)` on a port picked free, up to three times: the probes' port must be a
    fixed number (FAMIGLIA_HEALTH_ADDR), and a port picked free may be taken before it is bound."""
    for _attempt in range(3):
        probes = f"127.0.0.1:{free_port()}"
        try:
            return probes, start(probes)
        except RuntimeError as exc:
            assert "FAMIGLIA_HEALTH_ADDR" in str(exc), exc
    pytest.fail("no free port for the probes in three tries")


def test_the_probes_port_answers_health_in_plaintext_and_nothing_else(redis_url: str, pki) -> None:  # type: ignore[no-untyped-def]
    """A Kubernetes gRPC probe cannot speak TLS: FAMIGLIA_HEALTH_ADDR is a plaintext port of
    the health service alone, with the TLS port's answers; no game call is served there."""
    ca, pair, _ = pki

    def serve_with(probes: str) -> Iterator[int]:
        serving = _serve(redis_url, tls.transport({tls.CERT: str(pair.cert), tls.KEY: str(pair.key),
                                                   tls.HEALTH_ADDR: probes}))
        next(serving)
        return serving

    probes, serving = _on_a_free_probes_port(serve_with)
    try:
        assert _health(probes) == SERVING
        assert _health(probes, "famiglia.v1.GameService") == SERVING
        game = GameClient(probes, timeout=10)
        with pytest.raises(grpc.RpcError) as caught:
            game.list_games()
        game.close()
        assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        serving.close()
    with pytest.raises(grpc.RpcError):  # stopped with its server
        _health(probes)


def _start(env: dict[str, str], log: Path, module: str = "services.command") -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", module], env=env, cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=out)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _service_env(tmp_path: Path, redis_url: str, **settings: object) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAMIGLIA_TLS_")}
    env.update(PYTHONPATH=f"{ROOT / 'libs'}{os.pathsep}{ROOT}", FAMIGLIA_VAR_DIR=str(tmp_path / "var"),
               FAMIGLIA_SECRET=SECRET, FAMIGLIA_REDIS_URL=redis_url, FAMIGLIA_DATABASE_URL="",
               OTEL_SDK_DISABLED="true")
    env.update({name: str(value) for name, value in settings.items()})
    return env


@pytest.mark.parametrize("bad", ["cert_alone", "wrong_key", "missing_client_ca"])
def test_the_service_stops_at_start_on_a_bad_tls_setting(bad: str, redis_url: str, pki,  # type: ignore[no-untyped-def]
                                                        tmp_path: Path) -> None:
    ca, pair, _ = pki
    other = ca.issue("other")
    settings = {
        "cert_alone": ({"FAMIGLIA_TLS_CERT": pair.cert}, "FAMIGLIA_TLS_CERT is set but FAMIGLIA_TLS_KEY is not"),
        "wrong_key": ({"FAMIGLIA_TLS_CERT": pair.cert, "FAMIGLIA_TLS_KEY": other.key},
                      "is not the private key of FAMIGLIA_TLS_CERT"),
        "missing_client_ca": ({"FAMIGLIA_TLS_CERT": pair.cert, "FAMIGLIA_TLS_KEY": pair.key,
                               "FAMIGLIA_TLS_CLIENT_CA": tmp_path / "gone.pem"},
                              "FAMIGLIA_TLS_CLIENT_CA="),
    }[bad]
    log = tmp_path / "command.log"
    proc = _start(_service_env(tmp_path, redis_url, FAMIGLIA_COMMAND_ADDR="127.0.0.1:0", **settings[0]), log)
    assert proc.wait(timeout=60) == 1
    lines = log.read_text().strip().splitlines()
    assert len(lines) == 1 and settings[1] in lines[0], lines  # one line, no traceback


def test_the_service_process_serves_tls_and_the_cli_dials_it(redis_url: str, pki, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m services.command` with FAMIGLIA_TLS_CERT/KEY and FAMIGLIA_HEALTH_ADDR, as a
    deployment runs it; an operator's `famiglia match cancel --address grpcs://...`."""
    from famiglia.cli.main import main

    ca, pair, _ = pki
    log = tmp_path / "command.log"
    probes, (proc, port) = _on_a_free_probes_port(lambda probes: start_service("services.command", _service_env(
        tmp_path, redis_url, FAMIGLIA_COMMAND_ADDR="grpcs://localhost:0", FAMIGLIA_TLS_CERT=pair.cert,
        FAMIGLIA_TLS_KEY=pair.key, FAMIGLIA_HEALTH_ADDR=probes), log))
    try:
        deadline = time.monotonic() + 60
        while _health(probes) != SERVING:  # what the readiness probe asks, on its plaintext port
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.1)
        assert '"tls": "on"' in log.read_text() or "tls=on" in log.read_text(), log.read_text()[-2000:]
        address = f"grpcs://localhost:{port}"
        client = _client(address, monkeypatch, FAMIGLIA_TLS_CA=ca.ca)
        try:
            match, _, _ = match_and_first_move(client, seed=9)
        finally:
            client.close()
        monkeypatch.setenv("FAMIGLIA_SECRET", SECRET)
        monkeypatch.setenv("FAMIGLIA_VAR_DIR", str(tmp_path / "var"))
        capsys.readouterr()
        assert main(["match", "--address", address, "cancel", match.match_id, "--reason", "tls test"]) == 0
        assert f"{match.match_id}: cancelled at version" in " ".join(capsys.readouterr().out.split())
    finally:
        _stop(proc)


def _answers(port: int, ca: Path) -> bool:
    """Whether a new client trusting `ca` alone is answered on the TLS port (on a connection
    of its own: a handshake with the certificate served now)."""
    channel = tls.dial(f"grpcs://localhost:{port}", options=[("grpc.use_local_subchannel_pool", 1)],
                       env={tls.CA: str(ca)})
    try:
        return bool(GameClient(channel=channel, timeout=5).list_games())
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc
        return False
    finally:
        channel.close()


def test_a_renewed_certificate_is_served_without_a_restart(redis_url: str, tmp_path: Path) -> None:
    """cert-manager rewrites the Secret's files weeks before the certificate ends: new
    connections get the new one (here, of another CA) once both files hold it, while a
    rewrite that does not hold (the certificate before its key, junk) keeps the old one
    served; a connection made before goes on."""
    for name in ("first", "renewed", "secret"):
        (tmp_path / name).mkdir()
    first, renewed = CertificateAuthority(tmp_path / "first", "first"), CertificateAuthority(tmp_path / "renewed", "renewed")
    old, new = first.issue("command"), renewed.issue("command")
    files = Pair(tmp_path / "secret" / "tls.crt", tmp_path / "secret" / "tls.key")
    shutil.copyfile(old.cert, files.cert)
    shutil.copyfile(old.key, files.key)
    for port in _serve(redis_url, tls.transport({tls.CERT: str(files.cert), tls.KEY: str(files.key)})):
        assert _answers(port, first.ca) and not _answers(port, renewed.ca)
        before = GameClient(channel=tls.dial(f"grpcs://localhost:{port}", options=[("grpc.use_local_subchannel_pool", 1)],
                                             env={tls.CA: str(first.ca)}), timeout=5)
        assert before.list_games()
        for bad in (lambda: shutil.copyfile(new.cert, files.cert),  # the certificate written, its key not yet
                    lambda: files.cert.write_text("-----BEGIN CERTIFICATE-----\nhalf\n")):
            bad()
            time.sleep(tls.RENEWAL_CHECK_S * 1.5)  # past the next look at the files
            assert _answers(port, first.ca) and not _answers(port, renewed.ca)
        shutil.copyfile(new.cert, files.cert)
        shutil.copyfile(new.key, files.key)
        deadline = time.monotonic() + 15
        while not _answers(port, renewed.ca):
            assert time.monotonic() < deadline, "the renewed certificate was never served"
            time.sleep(0.2)
        assert not _answers(port, first.ca)
        assert before.list_games()  # its connection was made with the old certificate, and goes on
        before.close()


@pytest.mark.parametrize("module", ["services.bots", "services.bots.worker", "services.matchmaking"])
def test_a_service_dialling_the_command_service_stops_at_start_on_a_bad_tls_ca(module: str, redis_url: str,
                                                                                tmp_path: Path) -> None:
    """Its client of the command service raises TlsSettingError (as the SDK's does, for a
    caller to catch); the process, at start, stops with that one line."""
    log = tmp_path / "service.log"
    proc = _start(_service_env(tmp_path, redis_url, FAMIGLIA_COMMAND_ADDR=f"grpcs://localhost:{free_port()}",
                               FAMIGLIA_MATCHMAKING_ADDR="127.0.0.1:0", FAMIGLIA_BOTS_ADDR="127.0.0.1:0",
                               FAMIGLIA_TLS_CA=tmp_path / "gone.pem"), log, module)
    assert proc.wait(timeout=60) == 1
    lines = log.read_text().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("FAMIGLIA_TLS_CA=") and "cannot be read" in lines[0], lines


@pytest.mark.parametrize("module", ["services.bots", "services.matchmaking"])
def test_a_tls_service_dialling_the_command_service_in_plaintext_warns_at_start(module: str, redis_url: str, pki,  # type: ignore[no-untyped-def]
                                                                                tmp_path: Path) -> None:
    """The pair set for every service (a shell, a compose file's shared environment) with peers
    still at bare addresses: the command service serves TLS only, and these would retry their
    plaintext CreateMatch, refused as UNAVAILABLE, without a word."""
    _, pair, _ = pki
    command = f"127.0.0.1:{free_port()}"
    log = tmp_path / "service.log"
    proc = _start(_service_env(tmp_path, redis_url, FAMIGLIA_COMMAND_ADDR=command,
                               FAMIGLIA_MATCHMAKING_ADDR="127.0.0.1:0", FAMIGLIA_BOTS_ADDR="127.0.0.1:0",
                               FAMIGLIA_TLS_CERT=pair.cert, FAMIGLIA_TLS_KEY=pair.key), log, module)
    try:
        deadline = time.monotonic() + 60
        while "tls_peer_plaintext" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.1)
        [line] = [line for line in log.read_text().splitlines() if "tls_peer_plaintext" in line]
        assert "FAMIGLIA_COMMAND_ADDR" in line and f"grpcs://{command}" in line and "warning" in line, line
    finally:
        _stop(proc)


def _install(ca: CertificateAuthority, pair: Pair, where: Path) -> dict[str, str]:
    """A CA and a pair copied where a process reads them (a Secret's files): the paths by name."""
    where.mkdir(parents=True, exist_ok=True)
    for source, name in ((ca.ca, "ca.crt"), (pair.cert, "tls.crt"), (pair.key, "tls.key")):
        shutil.copyfile(source, where / name)
    return {"ca": str(where / "ca.crt"), "cert": str(where / "tls.crt"), "key": str(where / "tls.key")}


def test_a_running_client_follows_its_rotated_certificate_and_ca_without_a_restart(
        redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The services' clients of each other live as long as their process: an operator moving a
    mutual-TLS deployment to a new CA (the servers' pairs and trust, the clients' pairs and
    trust) must not have to restart them. A client read its files at dial only, and once its
    connection was gone (here, the server restarted with the new files) every handshake was
    refused. A client whose files were not rotated keeps its one channel."""
    for name in ("old", "new"):
        (tmp_path / name).mkdir()
    old_ca, new_ca = CertificateAuthority(tmp_path / "old", "old"), CertificateAuthority(tmp_path / "new", "new")
    server = _install(old_ca, old_ca.issue("command"), tmp_path / "server")
    rotated_files = _install(old_ca, old_ca.issue("bots"), tmp_path / "bots")
    kept_files = _install(old_ca, old_ca.issue("matchmaking"), tmp_path / "matchmaking")
    transport = tls.transport({tls.CERT: server["cert"], tls.KEY: server["key"], tls.CLIENT_CA: server["ca"]})
    store = RedisEventStore.connect(redis_url)
    app = bootstrap(store=store, settings=Settings(redis_url=redis_url, secret=SECRET))
    running, port = serve(app, "127.0.0.1:0", workers=8, transport=transport)
    running.start()
    clients = {}
    try:
        for name, files in (("rotated", rotated_files), ("kept", kept_files)):
            clients[name] = _client(f"grpcs://localhost:{port}", monkeypatch, FAMIGLIA_TLS_CA=files["ca"],
                                    FAMIGLIA_TLS_CLIENT_CERT=files["cert"], FAMIGLIA_TLS_CLIENT_KEY=files["key"])
        rotated, kept = clients["rotated"], clients["kept"]
        assert isinstance(rotated.channel, tls.RenewingChannel)
        assert rotated.list_games() and kept.list_games()
        _install(new_ca, new_ca.issue("command"), tmp_path / "server")  # the servers trust the new CA alone
        _install(new_ca, new_ca.issue("bots"), tmp_path / "bots")
        time.sleep(tls.RENEWAL_CHECK_S * 1.5)  # past the clients' next look at their files
        assert kept.list_games()  # files untouched: the same channel, on its connection
        running.stop(grace=None)  # every connection made with the old files is gone
        running, _ = serve(app, f"127.0.0.1:{port}", workers=8,
                           transport=tls.transport({tls.CERT: server["cert"], tls.KEY: server["key"],
                                                    tls.CLIENT_CA: server["ca"]}))
        running.start()
        match, me, command = match_and_first_move(rotated, seed=9)  # its next calls, on the new files
        assert me.submit(command).version > match.version
        assert isinstance(rotated.channel, tls.RenewingChannel) and rotated.channel.dialled == 2
        error = _refused(kept)  # still the old CA's: refused, as it should be
        assert error.code() == grpc.StatusCode.UNAVAILABLE, error
        assert isinstance(kept.channel, tls.RenewingChannel) and kept.channel.dialled == 1
    finally:
        for client in clients.values():
            client.close()
        running.stop(grace=None)
        store.close()
