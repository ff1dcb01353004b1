"""A long-lived client's TLS files over the months it runs (famiglia.grpcutil.tls.RenewingChannel):
the services' clients of each other read their client certificate and CA once, at dial, so
after an operator rotated them they failed every handshake until restarted. Now new calls go
on a channel dialled with the rotated files, the old one is closed once its last call ends,
and files that do not hold leave the client on what it read before, with one warning. Also:
every channel `dial` makes reconnects within `RECONNECT_MAX_S`, not gRPC's 120 s."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
import structlog

from famiglia.client import GameClient
from famiglia.grpcutil import tls
from tests.support.certs import CertificateAuthority, Pair


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def new_ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("rotated"), "rotated")


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class _Stream:
    """A call under way: ends when the test says."""

    def __init__(self) -> None:
        self.callbacks: list[Callable[[], None]] | None = []

    def add_callback(self, callback: Callable[[], None]) -> bool:
        if self.callbacks is None:
            return False
        self.callbacks.append(callback)
        return True

    def end(self) -> None:
        callbacks, self.callbacks = self.callbacks or [], None
        for callback in callbacks:
            callback()


class _Channel:
    """A channel dialled with `tls`: a unary call answers which channel took it."""

    def __init__(self, tls_: tls.ClientTls) -> None:
        self.tls = tls_
        self.closed = False
        self.streams: list[_Stream] = []

    def unary_unary(self, method: str, *args: Any, _registered_method: bool = False) -> Callable[..., Any]:
        return lambda request, **kwargs: self

    def unary_stream(self, method: str, *args: Any, _registered_method: bool = False) -> Callable[..., Any]:
        def start(request: object, **kwargs: Any) -> _Stream:
            self.streams.append(_Stream())
            return self.streams[-1]
        return start

    def close(self) -> None:
        self.closed = True


def _files(directory: Path, ca: CertificateAuthority, pair: Pair) -> dict[str, str]:
    """The client's files as an operator installs them (a Secret's): the CA it trusts, its pair."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ca.ca, directory / "ca.crt")
    shutil.copyfile(pair.cert, directory / "tls.crt")
    shutil.copyfile(pair.key, directory / "tls.key")
    return {tls.CA: str(directory / "ca.crt"), tls.CLIENT_CERT: str(directory / "tls.crt"),
            tls.CLIENT_KEY: str(directory / "tls.key")}


def _rotate(files: dict[str, str], ca: CertificateAuthority, pair: Pair) -> None:
    shutil.copyfile(ca.ca, files[tls.CA])
    shutil.copyfile(pair.cert, files[tls.CLIENT_CERT])
    shutil.copyfile(pair.key, files[tls.CLIENT_KEY])


def _client(files: dict[str, str]) -> tuple[_Clock, list[_Channel], tls.RenewingChannel]:
    clock, dialled = _Clock(), []

    def connect(target: str, tls_: tls.ClientTls, options: Sequence[tuple[str, Any]]) -> Any:
        dialled.append(_Channel(tls_))
        return dialled[-1]

    channel = tls.RenewingChannel("localhost:1", tuple(files.items()), check_every=1.0, clock=clock, connect=connect)
    return clock, dialled, channel


def test_a_client_whose_files_do_not_change_keeps_its_one_channel(ca: CertificateAuthority, tmp_path: Path) -> None:
    files = _files(tmp_path, ca, ca.issue("bots"))
    clock, dialled, channel = _client(files)
    call = channel.unary_unary("/famiglia.v1.GameService/ListGames")
    for _ in range(5):
        clock.t += 1.5
        assert call(b"") is dialled[0]
    Path(files[tls.CLIENT_CERT]).write_bytes(Path(files[tls.CLIENT_CERT]).read_bytes())  # touched: the same bytes
    clock.t += 1.5
    assert call(b"") is dialled[0]
    assert channel.dialled == 1 and len(dialled) == 1 and not dialled[0].closed


def test_rotated_files_dial_new_calls_and_the_old_channel_closes_after_its_last_stream(
        ca: CertificateAuthority, new_ca: CertificateAuthority, tmp_path: Path) -> None:
    files = _files(tmp_path, ca, ca.issue("bots"))
    clock, dialled, channel = _client(files)
    call = channel.unary_unary("/famiglia.v1.GameService/ListGames")
    stream = channel.unary_stream("/famiglia.v1.GameService/StreamEvents")
    following = stream(b"")
    assert call(b"") is dialled[0]
    rotated = new_ca.issue("bots")
    _rotate(files, new_ca, rotated)
    clock.t += 0.5
    assert call(b"") is dialled[0], "looked at before its second"
    clock.t += 1.0
    with structlog.testing.capture_logs() as logs:
        assert call(b"") is dialled[1]
    assert dialled[1].tls.roots == new_ca.ca.read_bytes()
    assert dialled[1].tls.pair is not None and dialled[1].tls.pair.certificate_chain == rotated.cert.read_bytes()
    assert [e["event"] for e in logs] == ["tls_client_certificate_renewed"]
    assert not dialled[0].closed, "closed under its open stream"
    following.end()
    assert call(b"") is dialled[1]
    assert dialled[0].closed and not dialled[1].closed and channel.dialled == 2
    channel.close()
    assert dialled[1].closed


@pytest.mark.parametrize("rewrite", ["certificate_before_its_key", "junk"])
def test_files_that_do_not_hold_keep_the_client_on_what_it_read_with_one_warning(
        rewrite: str, ca: CertificateAuthority, new_ca: CertificateAuthority, tmp_path: Path) -> None:
    files = _files(tmp_path, ca, ca.issue("bots"))
    clock, dialled, channel = _client(files)
    call = channel.unary_unary("/famiglia.v1.GameService/ListGames")
    rotated = new_ca.issue("bots")
    if rewrite == "junk":
        Path(files[tls.CLIENT_CERT]).write_text("-----BEGIN CERTIFICATE-----\nhalf\n")
    else:
        shutil.copyfile(rotated.cert, files[tls.CLIENT_CERT])
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            clock.t += 1.5
            assert call(b"") is dialled[0]
    [warning] = [e for e in logs if e["event"] == "tls_client_renewal_refused"]
    assert warning["log_level"] == "warning" and tls.CLIENT_CERT in warning["reason"]
    _rotate(files, new_ca, rotated)
    clock.t += 1.5
    assert call(b"") is dialled[1] and dialled[0].closed


class _Watched(_Channel):
    """A channel whose state callbacks are kept; `on_unsubscribe` runs in its `unsubscribe`."""

    def __init__(self, tls_: tls.ClientTls) -> None:
        super().__init__(tls_)
        self.subscribed: list[Callable[[grpc.ChannelConnectivity], None]] = []
        self.on_unsubscribe: Callable[[], None] = lambda: None

    def subscribe(self, callback: Callable[[grpc.ChannelConnectivity], None], try_to_connect: bool = False) -> None:
        self.subscribed.append(callback)

    def unsubscribe(self, callback: Callable[[grpc.ChannelConnectivity], None]) -> None:
        self.on_unsubscribe()
        if callback in self.subscribed:
            self.subscribed.remove(callback)


def test_a_callback_unsubscribed_while_a_renewal_moves_it_is_not_called_again(
        ca: CertificateAuthority, new_ca: CertificateAuthority, tmp_path: Path) -> None:
    """A renewal moves the state callbacks (`grpc.channel_ready_future`'s, a caller's) to the new
    channel outside the lock: one unsubscribed by another thread meanwhile was subscribed again
    there, and called for as long as the channel lived."""
    files = _files(tmp_path, ca, ca.issue("bots"))
    clock, dialled = _Clock(), []

    def connect(target: str, tls_: tls.ClientTls, options: Sequence[tuple[str, Any]]) -> Any:
        dialled.append(_Watched(tls_))
        return dialled[-1]

    channel = tls.RenewingChannel("localhost:1", tuple(files.items()), check_every=1.0, clock=clock, connect=connect)

    def watcher(_state: grpc.ChannelConnectivity) -> None:
        return None

    channel.subscribe(watcher)
    leaving = threading.Thread(target=channel.unsubscribe, args=(watcher,))

    def meanwhile() -> None:  # another thread leaves while the renewal is moving the callbacks
        dialled[0].on_unsubscribe = lambda: None
        leaving.start()
        leaving.join(0.2)  # done at once before the fix; waits for the renewal after it

    dialled[0].on_unsubscribe = meanwhile
    _rotate(files, new_ca, new_ca.issue("bots"))
    clock.t += 1.5
    channel.unary_unary("/famiglia.v1.GameService/ListGames")(b"")
    leaving.join()
    assert len(dialled) == 2
    assert watcher not in dialled[1].subscribed and watcher not in dialled[0].subscribed
    channel.close()


def test_dial_follows_the_files_of_a_tls_client_only(ca: CertificateAuthority, tmp_path: Path) -> None:
    files = _files(tmp_path, ca, ca.issue("bots"))
    followed = tls.dial("grpcs://localhost:1", env=files)
    assert isinstance(followed, tls.RenewingChannel) and followed.files == files
    followed.close()
    for plain in (tls.dial("localhost:1", env=files), tls.dial("grpcs://localhost:1", env={})):
        assert not isinstance(plain, tls.RenewingChannel)  # plaintext; the system's roots and no file
        plain.close()


def _options_dialled(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    real = grpc.insecure_channel

    def insecure_channel(target: str, options: Sequence[tuple[str, Any]] | None = None, **kwargs: Any) -> grpc.Channel:
        seen.append(dict(options or ()))
        return real(target, options=options, **kwargs)

    monkeypatch.setattr(grpc, "insecure_channel", insecure_channel)
    return seen


def test_every_channel_dialled_reconnects_within_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """gRPC's own reconnect waits grow to 120 s: calls fail at once (UNAVAILABLE) that long after
    the server is back. `dial` bounds them for every client; a caller's own value wins."""
    seen = _options_dialled(monkeypatch)
    tls.dial("localhost:1").close()
    tls.dial("localhost:1", options=[("grpc.max_reconnect_backoff_ms", 3000)]).close()
    bound = round(tls.RECONNECT_MAX_S * 1000)
    assert seen[0]["grpc.max_reconnect_backoff_ms"] == bound <= 15_000
    assert seen[0]["grpc.min_reconnect_backoff_ms"] == bound
    assert seen[0]["grpc.initial_reconnect_backoff_ms"] == 1000
    assert seen[1]["grpc.max_reconnect_backoff_ms"] == 3000


def test_the_sdk_takes_its_reconnect_bound_beside_its_keepalive(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _options_dialled(monkeypatch)
    GameClient("localhost:1").close()
    GameClient("localhost:1", reconnect_max_s=2.5, keepalive_s=30).close()
    assert seen[0]["grpc.max_reconnect_backoff_ms"] == round(tls.RECONNECT_MAX_S * 1000)
    assert seen[0]["grpc.keepalive_time_ms"] == 60_000
    assert (seen[1]["grpc.max_reconnect_backoff_ms"], seen[1]["grpc.min_reconnect_backoff_ms"]) == (2500, 2500)
    assert seen[1]["grpc.keepalive_time_ms"] == 30_000
    with pytest.raises(ValueError, match="reconnect_max_s"):
        GameClient("localhost:1", reconnect_max_s=0)
