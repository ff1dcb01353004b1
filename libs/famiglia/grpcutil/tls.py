"""Transport security: what a server serves TLS with, checked at start and renewed from its
files while it runs, and the one way every famiglia client dials an address
(`grpcs://host[:port]` is TLS, anything else plaintext). Seat tokens travel on every call, so
an operator who exposes a server beyond loopback serves it with TLS, here or at an Ingress in
front of it (docs/architecture.md, "Transport security").

A bad setting (one of the pair alone, a file that cannot be read or holds no PEM, a key that
is not the certificate's, a certificate expired or not yet valid) raises `TlsSettingError`
with one line naming it: a service or the CLI stops on it (`exit_on_bad_setting`), as on
famiglia.config's settings, while a library caller (the SDK's `dial`) can catch it. One of
the pair alone would otherwise serve plaintext, and gRPC answers a key that is not the
certificate's with a traceback of "Failed to bind to address", as if the port were taken.

A certificate is renewed in place (cert-manager rewrites its Secret's files weeks before it
ends): the server looks at the files again on new connections (`Renewal`), and serves new
ones once they pass the checks of the start; bad ones leave it serving the old pair, with a
warning, never stopped nor plaintext. A client follows its own files alike (`RenewingChannel`:
the CA it trusts, the certificate it shows), and reconnects to a server it lost within
`RECONNECT_MAX_S` (`reconnect_options`), not gRPC's two minutes.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import os
import re
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc

from famiglia.telemetry import get_logger

CERT = "FAMIGLIA_TLS_CERT"
KEY = "FAMIGLIA_TLS_KEY"
CLIENT_CA = "FAMIGLIA_TLS_CLIENT_CA"
CA = "FAMIGLIA_TLS_CA"
CLIENT_CERT = "FAMIGLIA_TLS_CLIENT_CERT"
CLIENT_KEY = "FAMIGLIA_TLS_CLIENT_KEY"
"""What a client shows a server that asks for a certificate (mutual TLS). Not the server's own
pair: a shell set up to reach a mutual-TLS deployment (the CLI's) must not make every server
started from it serve TLS, nor a server's pair make it a client of other servers by surprise."""
HEALTH_ADDR = "FAMIGLIA_HEALTH_ADDR"
SETTINGS = (CERT, KEY, CLIENT_CA, CA, CLIENT_CERT, CLIENT_KEY, HEALTH_ADDR)
"""Every transport setting: what a harness that starts services on plaintext loopback addresses
of its own (the bench) takes out of the environment it hands them, or they would serve TLS
(or bind one health port each) where it dials plaintext."""

TLS_SCHEME = "grpcs://"
PLAIN_SCHEME = "grpc://"
TLS_PORT = 443

ENDING_WARNING = dt.timedelta(days=14)
"""A served certificate this close to its end is warned about (at start, and while serving):
cert-manager renews a 90-day certificate 30 days before it ends, so one still served within
two weeks of its end is one whose renewal is not reaching the server."""
RENEWAL_CHECK_S = 1.0
"""How often, at most, new connections look at the files again (a read and digest of each)."""

log = get_logger("famiglia.tls")


class TlsSettingError(ValueError):
    """A TLS setting that does not hold, in one line naming it. A service or the CLI stops on
    it at start (`exit_on_bad_setting`); a library caller (the SDK's `dial`) may catch it."""


@contextmanager
def exit_on_bad_setting() -> Iterator[None]:
    """Where a service or the CLI starts: a bad TLS setting ends the process with its one line
    (SystemExit, as famiglia.config's settings do), not a traceback."""
    try:
        yield
    except TlsSettingError as exc:
        raise SystemExit(str(exc)) from None


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate chain and its private key, checked to belong together; the dates
    its (first, leaf) certificate is valid between."""

    certificate_chain: bytes
    private_key: bytes = field(repr=False)
    not_before: dt.datetime | None = None
    not_after: dt.datetime | None = None


@dataclass(frozen=True)
class ServerTls:
    """What a server serves TLS with; `client_ca`: clients must show a certificate it signed.
    `files`: the settings it was read from (name, path), which a renewal rewrites; `stamp`:
    what those files looked like before they were read (`_stamp`)."""

    pair: KeyPair
    client_ca: bytes | None = None
    files: tuple[tuple[str, str], ...] = ()
    stamp: tuple[object, ...] = field(default=(), compare=False, repr=False)

    def configuration(self) -> grpc.ServerCertificateConfiguration:
        return grpc.ssl_server_certificate_configuration(
            [(self.pair.private_key, self.pair.certificate_chain)], root_certificates=self.client_ca)

    def credentials(self, check_every: float = RENEWAL_CHECK_S) -> grpc.ServerCredentials:
        """Credentials that follow the files (`Renewal`), or, for a pair given in code, that pair."""
        if not self.files:
            return grpc.ssl_server_credentials(
                [(self.pair.private_key, self.pair.certificate_chain)],
                root_certificates=self.client_ca, require_client_auth=self.client_ca is not None)
        return Renewal(self, check_every=check_every).credentials()


def _setting(name: str, env: Mapping[str, str]) -> str:
    return env.get(name, "").strip()


def _read(name: str, path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as exc:
        raise TlsSettingError(f"{name}={path!r} cannot be read: {exc.strerror or exc}") from None


def _pem(name: str, path: str, kind: str) -> bytes:
    """The file's bytes, which must hold a PEM block of `kind` (CERTIFICATE, PRIVATE KEY)."""
    data = _read(name, path)
    if b"-----BEGIN " not in data or f"{kind}-----".encode() not in data:
        raise TlsSettingError(f"{name}={path!r} holds no PEM {kind.lower()} (-----BEGIN ...{kind}-----)")
    return data


_FIRST_CERTIFICATE = re.compile(rb"-----BEGIN CERTIFICATE-----(.+?)-----END CERTIFICATE-----", re.S)


def _der(data: bytes, at: int) -> tuple[int, int, int]:
    """(tag, where its content starts, where it ends) of the DER item at `at`."""
    tag, length = data[at], data[at + 1]
    at += 2
    if length & 0x80:
        size = length & 0x7F
        length, at = int.from_bytes(data[at:at + size], "big"), at + size
    if at + length > len(data):
        raise ValueError("truncated")
    return tag, at, at + length


def _time(data: bytes, at: int) -> tuple[dt.datetime, int]:
    tag, start, end = _der(data, at)
    text = data[start:end].decode("ascii")
    if tag == 0x17:  # UTCTime, YYMMDDHHMMSSZ: years 1950-2049 (RFC 5280)
        when = dt.datetime.strptime(text, "%y%m%d%H%M%SZ")
        when = when.replace(year=when.year - 100) if when.year >= 2050 else when
    elif tag == 0x18:  # GeneralizedTime, YYYYMMDDHHMMSSZ: from 2050
        when = dt.datetime.strptime(text, "%Y%m%d%H%M%SZ")
    else:
        raise ValueError(f"tag {tag:#x} is no time")
    return when.replace(tzinfo=dt.UTC), end


def validity(chain: bytes) -> tuple[dt.datetime, dt.datetime]:
    """(notBefore, notAfter) of the first certificate of a PEM chain, the server's own.

    Read from its DER with the standard library: the two dates are all a service needs of a
    certificate OpenSSL has already accepted (`_key_pair`), not worth a runtime dependency
    (`cryptography` stays the tests', which check this against certificates it makes)."""
    found = _FIRST_CERTIFICATE.search(chain)
    if found is None:
        raise ValueError("no PEM certificate")
    der = base64.b64decode(b"".join(found.group(1).split()), validate=True)
    _, at, _ = _der(der, 0)  # Certificate
    _, at, _ = _der(der, at)  # TBSCertificate
    tag, start, end = _der(der, at)
    at = end if tag == 0xA0 else at  # [0] version, absent from a v1 certificate
    for _skipped in ("serialNumber", "signature", "issuer"):
        at = _der(der, at)[2]
    _, at, _ = _der(der, at)  # Validity
    not_before, at = _time(der, at)
    not_after, _ = _time(der, at)
    return not_before, not_after


def _shown(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M UTC")


def _dated(name: str, path: str, chain: bytes, now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """The certificate's dates, which must hold `now`: gRPC serves an expired certificate
    without a word, and every client then refuses the handshake, one by one, as UNAVAILABLE."""
    try:
        not_before, not_after = validity(chain)
    except (ValueError, IndexError) as exc:
        raise TlsSettingError(f"{name}={path!r} holds a certificate whose dates cannot be read ({exc})") from None
    if now > not_after:
        raise TlsSettingError(f"{name}={path!r} expired on {_shown(not_after)} "
                              f"(valid from {_shown(not_before)}): renew it")
    if now < not_before:
        raise TlsSettingError(f"{name}={path!r} is not valid before {_shown(not_before)} "
                              f"(until {_shown(not_after)}; is this host's clock right?)")
    return not_before, not_after


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _key_pair(env: Mapping[str, str], cert_name: str = CERT, key_name: str = KEY,
              now: dt.datetime | None = None) -> KeyPair | None:
    """A certificate and its key (FAMIGLIA_TLS_CERT and FAMIGLIA_TLS_KEY, or the client's), both or neither."""
    cert, key = _setting(cert_name, env), _setting(key_name, env)
    if not cert and not key:
        return None
    if not cert or not key:
        given, missing = (cert_name, key_name) if cert else (key_name, cert_name)
        raise TlsSettingError(f"{given} is set but {missing} is not: TLS takes both PEM files "
                              "(the certificate chain and its private key), or neither")
    chain, private = _pem(cert_name, cert, "CERTIFICATE"), _pem(key_name, key, "PRIVATE KEY")
    asked = []

    def no_password() -> bytes:  # never OpenSSL's prompt on the terminal of a service
        asked.append(True)
        return b""

    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key, password=no_password)
    except ssl.SSLError as exc:
        if asked:
            raise TlsSettingError(f"{key_name}={key!r} is encrypted: gRPC takes an unencrypted private key "
                                  "(keep it in a Secret readable by the service alone)") from None
        raise TlsSettingError(f"{key_name}={key!r} is not the private key of {cert_name}={cert!r} "
                              f"({exc.reason or exc})") from None
    except OSError as exc:  # replaced between our read and OpenSSL's (a renewal under way)
        raise TlsSettingError(f"{cert_name}={cert!r} cannot be read: {exc.strerror or exc}") from None
    not_before, not_after = _dated(cert_name, cert, chain, now or _now())
    return KeyPair(chain, private, not_before, not_after)


def _ca(name: str, env: Mapping[str, str]) -> bytes | None:
    path = _setting(name, env)
    if not path:
        return None
    data = _pem(name, path, "CERTIFICATE")
    try:
        ssl.create_default_context(cadata=data.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError) as exc:
        raise TlsSettingError(f"{name}={path!r} holds no usable CA certificate ({exc})") from None
    return data


def _stamp(paths: Sequence[str]) -> tuple[object, ...]:
    """What the files hold: a digest of each (read through the symlinks of a Kubernetes Secret
    volume, whose update swaps them all at once), or the error reading it. Not their `stat`: a
    rewrite in place of the same size within the clock tick of the last write keeps its inode,
    size and mtime (a coarse kernel clock), and would go unseen; a few kB read at most once a
    second cost nothing."""
    seen: list[object] = []
    for path in paths:
        try:
            with open(path, "rb") as file:
                seen.append(hashlib.blake2b(file.read(), digest_size=16).digest())
        except OSError as exc:
            seen.append(exc.errno)
    return tuple(seen)


class _Changing(TlsSettingError):
    """The files changed while they were read (a renewal being written): what was read may be
    half of each, and is read again."""


def _read_server_tls(env: Mapping[str, str], now: dt.datetime | None = None) -> ServerTls | None:
    files = tuple((name, _setting(name, env)) for name in (CERT, KEY, CLIENT_CA) if _setting(name, env))
    paths = [path for _, path in files]
    stamp = _stamp(paths)  # before reading: a change after it is seen next time
    try:
        pair = _key_pair(env, now=now)
        client_ca = _ca(CLIENT_CA, env)
    except TlsSettingError:
        if _stamp(paths) != stamp:
            raise _Changing(f"{CERT} and its key changed while read") from None
        raise
    if pair is None:
        if client_ca is not None:
            raise TlsSettingError(f"{CLIENT_CA} is set but {CERT} and {KEY} are not: "
                                  "mutual TLS needs the server's own certificate and key")
        return None
    if _stamp(paths) != stamp:  # the pair checked (by path) may not be the bytes read
        raise _Changing(f"{CERT} and its key changed while read")
    return ServerTls(pair, client_ca, files, stamp)


def _ending(served: ServerTls, now: dt.datetime) -> bool:
    return served.pair.not_after is not None and now >= served.pair.not_after - ENDING_WARNING


def _warn_ending(served: ServerTls, now: dt.datetime) -> None:
    assert served.pair.not_after is not None
    log.warning("tls_certificate_ending", setting=CERT, path=dict(served.files).get(CERT, ""),
                not_after=_shown(served.pair.not_after),
                days_left=round((served.pair.not_after - now) / dt.timedelta(days=1), 1),
                hint="renew it: a renewed certificate is served without a restart")


def server_tls(env: Mapping[str, str] | None = None) -> ServerTls | None:
    """The server's TLS settings, read and checked now, at start (a certificate near its end
    is warned about); None: serve plaintext (the default)."""
    env = os.environ if env is None else env
    now = _now()
    for _attempt in range(3):
        try:
            served = _read_server_tls(env, now)
            break
        except _Changing:  # being renewed as the service starts: once written, they hold still
            time.sleep(0.2)
    else:
        served = _read_server_tls(env, now)
    if served is not None and _ending(served, now):
        _warn_ending(served, now)
    return served


class Renewal:
    """A server's certificate, renewed from its files while it serves (cert-manager rewrites
    them weeks before it ends; a restart for each would cut every stream).

    gRPC asks `fetch` before each new connection's handshake: it looks at the files (a
    digest of each, at most every `check_every` seconds) and, when they changed, reads and checks
    them as at start and answers the new configuration, or None to keep the current one.
    Files that do not hold (half written, a key of another certificate, expired, unreadable)
    keep the old pair served, with one warning per change; they are read again at most every
    `check_every` seconds while they stay bad (one not yet valid becomes good without a
    change). Nothing here stops a serving process, nor makes it serve plaintext."""

    def __init__(self, served: ServerTls, *, check_every: float = RENEWAL_CHECK_S,
                 clock: Callable[[], float] = time.monotonic, now: Callable[[], dt.datetime] = _now) -> None:
        self.served = served
        self._check_every = check_every
        self._clock = clock
        self._now = now
        self._lock = threading.Lock()
        self._next = clock() + check_every
        self._seen = served.stamp
        self._warned: tuple[object, ...] | None = None
        self._ending_told = _ending(served, now())  # told at start already (server_tls)

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(
            self.served.configuration(), self.fetch,
            require_client_authentication=self.served.client_ca is not None)

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """gRPC's certificate_configuration_fetcher: never raises (gRPC would log its own error
        for each connection), never waits for another connection's look at the files."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            return self._fetch()
        except Exception:  # noqa: BLE001 - the old pair goes on serving
            log.exception("tls_renewal_failed", setting=CERT)
            return None
        finally:
            self._lock.release()

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        clock = self._clock()
        if clock < self._next:
            return None
        self._next = clock + self._check_every
        now = self._now()
        if not self._ending_told and _ending(self.served, now):
            self._ending_told = True
            _warn_ending(self.served, now)
        files = dict(self.served.files)
        stamp = _stamp(list(files.values()))
        if stamp == self._seen:
            return None
        try:
            fresh = _read_server_tls(files, now)
        except _Changing:
            return None  # read again at the next look, once written
        except TlsSettingError as exc:
            if stamp != self._warned:
                self._warned = stamp
                log.warning("tls_renewal_refused", reason=str(exc), not_after=self._served_until(),
                            hint="the certificate served so far is kept until the files hold")
            return None
        assert fresh is not None  # the same settings as at start, the pair among them
        self._seen = stamp
        if fresh == self.served:  # touched, or swapped back: nothing new to serve
            return None
        self.served = fresh
        self._ending_told = _ending(fresh, now)
        log.info("tls_certificate_renewed", setting=CERT, path=files.get(CERT, ""), not_after=self._served_until())
        if self._ending_told:
            _warn_ending(fresh, now)
        return fresh.configuration()

    def _served_until(self) -> str:
        return _shown(self.served.pair.not_after) if self.served.pair.not_after else ""


@dataclass(frozen=True)
class Transport:
    """How a server listens: TLS (`tls`) or plaintext, and a plaintext port answering health
    alone (`health_address`, for probes that cannot speak TLS), if any."""

    tls: ServerTls | None = None
    health_address: str = ""

    @property
    def shown(self) -> str:
        """What a start-up line says of it: off, on, or mutual (client certificates asked)."""
        return "off" if self.tls is None else "mutual" if self.tls.client_ca is not None else "on"


def _health_address(env: Mapping[str, str]) -> str:
    addr = _setting(HEALTH_ADDR, env)
    if not addr:
        return ""
    host, colon, port = addr.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise TlsSettingError(f"{HEALTH_ADDR}={addr!r} is not HOST:PORT with a port of 1-65535")
    return f"127.0.0.1:{port}" if host in ("localhost", "127.0.0.1") else addr


def transport(env: Mapping[str, str] | None = None) -> Transport:
    """A server's transport settings (FAMIGLIA_TLS_CERT/KEY/CLIENT_CA, FAMIGLIA_HEALTH_ADDR),
    read and checked now, at start."""
    env = os.environ if env is None else env
    return Transport(server_tls(env), _health_address(env))


@dataclass(frozen=True)
class ClientTls:
    """What a TLS client trusts (`roots`: FAMIGLIA_TLS_CA; None, the system's roots) and shows a
    server that asks for a client certificate (`pair`: FAMIGLIA_TLS_CLIENT_CERT/KEY)."""

    roots: bytes | None = None
    pair: KeyPair | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        if self.pair is None:
            return grpc.ssl_channel_credentials(root_certificates=self.roots)
        return grpc.ssl_channel_credentials(root_certificates=self.roots, private_key=self.pair.private_key,
                                            certificate_chain=self.pair.certificate_chain)


def _client_files(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """(setting, path) of the client's files that are set: what a TLS client follows."""
    return tuple((name, _setting(name, env)) for name in (CA, CLIENT_CERT, CLIENT_KEY) if _setting(name, env))


def _read_client_tls(env: Mapping[str, str]) -> ClientTls:
    return ClientTls(_ca(CA, env), _key_pair(env, CLIENT_CERT, CLIENT_KEY))


def client_credentials(env: Mapping[str, str] | None = None) -> grpc.ChannelCredentials:
    """A TLS client's credentials: trusting FAMIGLIA_TLS_CA (a private CA) or else the system's
    roots, and showing FAMIGLIA_TLS_CLIENT_CERT/KEY to a server that asks for a client
    certificate (mutual TLS; a server that does not ask never sees it). Read now, once: `dial`
    follows the files while its channel lives (`RenewingChannel`)."""
    env = os.environ if env is None else env
    return _read_client_tls(env).credentials()


RECONNECT_MAX_S = 10.0
"""The longest a client's channel waits between two attempts to reach a server it lost (and
gives one attempt that gets no answer): gRPC's own default grows to 120 s, so a phone or a
service would go on failing (UNAVAILABLE at once, each call) up to two minutes after the
server is back. gRPC adds up to a fifth of jitter."""
RECONNECT_FIRST_S = 1.0
"""The first wait after a connection is lost or refused (gRPC's default), doubling (x1.6) to
`RECONNECT_MAX_S`."""


def reconnect_options(max_s: float = RECONNECT_MAX_S) -> list[tuple[str, int]]:
    """Channel options that keep a client's reconnect waits within `max_s` (`RECONNECT_MAX_S`):
    `dial` gives them to every channel unless its caller names them. `grpc.min_reconnect_backoff_ms`
    is, in gRPC core, how long one attempt (connect and handshake) may take: the bound too, so
    an attempt lost in a dead network is given up in time for the next."""
    if not max_s > 0:
        raise ValueError(f"reconnect_max_s must be above 0, not {max_s!r}")
    max_ms = max(1, round(max_s * 1000))
    return [
        ("grpc.initial_reconnect_backoff_ms", min(round(RECONNECT_FIRST_S * 1000), max_ms)),
        ("grpc.min_reconnect_backoff_ms", max_ms),
        ("grpc.max_reconnect_backoff_ms", max_ms),
    ]


def dial_target(address: str) -> tuple[str, bool]:
    """(the host:port gRPC dials, whether over TLS) of a famiglia address: `grpcs://host[:port]`
    (port 443 unless given) is TLS; `grpc://host:port` and a bare `host:port` are plaintext."""
    if address.startswith(TLS_SCHEME):
        target = address[len(TLS_SCHEME):].rstrip("/")
        host, colon, port = target.rpartition(":")
        if not colon or not port.isdigit():  # no port (an IPv6 [::1] ends with "]")
            target = f"{target}:{TLS_PORT}"
        return target, True
    if address.startswith(PLAIN_SCHEME):
        return address[len(PLAIN_SCHEME):].rstrip("/"), False
    return address, False


def dial(address: str, options: Sequence[tuple[str, Any]] | None = None,
         env: Mapping[str, str] | None = None) -> grpc.Channel:
    """A channel to a famiglia address (`dial_target`): every client here dials through this,
    so the SDK, the CLI and the services' clients of each other follow the same settings.

    It reconnects within `RECONNECT_MAX_S` (`reconnect_options`, unless `options` name them);
    over TLS with files of its own (FAMIGLIA_TLS_CA, FAMIGLIA_TLS_CLIENT_CERT/KEY) it follows
    them (`RenewingChannel`): a rotated client certificate or CA needs no restart."""
    target, secure = dial_target(address)
    given = list(options or ())
    named = {name for name, _ in given}
    given += [option for option in reconnect_options() if option[0] not in named]
    if not secure:
        return grpc.insecure_channel(target, options=given)
    env = os.environ if env is None else env
    files = _client_files(env)
    if not files:  # the system's roots, no client certificate: nothing to follow
        return grpc.secure_channel(target, grpc.ssl_channel_credentials(), options=given)
    return RenewingChannel(target, files, given)


class _Dialled:
    """One channel a `RenewingChannel` dialled, and its calls still open (`calls`); `retired`:
    renewed files dialled another, and this one is closed once its last call ends."""

    def __init__(self, channel: grpc.Channel, tls: ClientTls) -> None:
        self.channel = channel
        self.tls = tls
        self.calls = 0
        self.retired = False


def _secure_channel(target: str, tls: ClientTls, options: Sequence[tuple[str, Any]]) -> grpc.Channel:
    return grpc.secure_channel(target, tls.credentials(), options=options)


class RenewingChannel(grpc.Channel):
    """A TLS client's channel that follows its files (FAMIGLIA_TLS_CA,
    FAMIGLIA_TLS_CLIENT_CERT/KEY) as a server follows its own (`Renewal`): the services' clients
    of each other live as long as their process, and an operator rotating the client certificate
    or the CA (cert-manager renewing a Secret) must not have to restart them all, nor see them
    refused at each handshake until then.

    Each new call looks at the files (a digest of each, at most every `check_every` seconds);
    when they changed and hold (read and checked as at dial), new calls go on a channel dialled
    with them, and the old channel is closed once its last call (a stream) ends. Files that do
    not hold (half written, a key of another certificate, expired) leave the client on what it
    read before, with one `tls_client_renewal_refused` warning per change: nothing here fails a
    call."""

    def __init__(self, target: str, files: Sequence[tuple[str, str]], options: Sequence[tuple[str, Any]] = (), *,
                 check_every: float = RENEWAL_CHECK_S, clock: Callable[[], float] = time.monotonic,
                 connect: Callable[[str, ClientTls, Sequence[tuple[str, Any]]], grpc.Channel] = _secure_channel) -> None:
        self.target = target
        self.files = dict(files)
        self._options = list(options)
        self._check_every = check_every
        self._clock = clock
        self._connect = connect
        self._paths = list(self.files.values())
        self._seen = _stamp(self._paths)  # before reading: a change after it is seen next time
        tls = _read_client_tls(self.files)  # a bad setting raises here, at dial, as it always did
        self._current = _Dialled(connect(target, tls, self._options), tls)
        self._retired: list[_Dialled] = []
        self._subscribed: dict[Callable[[grpc.ChannelConnectivity], None], bool] = {}
        self._lock = threading.Lock()
        self._subscribing = threading.Lock()
        """Held while callbacks are subscribed, unsubscribed or moved to a renewal's channel (never
        under `_lock`): a callback unsubscribed while a renewal moved it went on being called on
        the new channel; one subscribed meanwhile stayed on the retired one."""
        self._looking = threading.Lock()
        self._next = clock() + check_every
        self._warned: tuple[object, ...] | None = None
        self._closed = False
        self.dialled = 1
        """How many channels it dialled: 1, and one more for each renewal of its files."""

    @property
    def tls(self) -> ClientTls:
        """What new calls go with."""
        return self._current.tls

    # -- the files --------------------------------------------------------------------------
    def _look(self) -> None:
        """At most every `check_every` seconds, and never waiting for another caller's look."""
        if self._clock() < self._next or not self._looking.acquire(blocking=False):
            return
        try:
            if self._clock() >= self._next:
                self._next = self._clock() + self._check_every
                self._renew()
        except Exception:  # noqa: BLE001 - the client goes on with what it has
            log.exception("tls_client_renewal_failed", target=self.target)
        finally:
            self._looking.release()

    def _renew(self) -> None:
        stamp = _stamp(self._paths)
        if stamp == self._seen:
            return
        try:
            fresh = _read_client_tls(self.files)
        except TlsSettingError as exc:
            if _stamp(self._paths) == stamp and stamp != self._warned:  # not a renewal being written
                self._warned = stamp
                log.warning("tls_client_renewal_refused", target=self.target, reason=str(exc),
                            hint="this client goes on with the files it read before until they hold")
            return
        if _stamp(self._paths) != stamp:
            return  # changed while read: read again at the next look, once written
        self._seen = stamp
        if fresh == self.tls:  # touched, or swapped back: nothing new to dial with
            return
        dialled = _Dialled(self._connect(self.target, fresh, self._options), fresh)
        with self._subscribing:
            with self._lock:
                if self._closed:
                    dialled.channel.close()
                    return
                old, self._current = self._current, dialled
                old.retired = True
                self._retired.append(old)
                self.dialled += 1
                subscribed = dict(self._subscribed)
            for callback, try_to_connect in subscribed.items():
                old.channel.unsubscribe(callback)
                dialled.channel.subscribe(callback, try_to_connect=try_to_connect)
        self._close_idle()
        pair = fresh.pair
        log.info("tls_client_certificate_renewed", target=self.target, files=sorted(self.files),
                 not_after=_shown(pair.not_after) if pair is not None and pair.not_after else "")

    # -- calls ------------------------------------------------------------------------------
    def _take(self) -> _Dialled:
        """The channel a new call goes on (dialled with the files of now), counted open."""
        self._look()
        if self._retired:
            self._close_idle()
        with self._lock:
            dialled = self._current
            dialled.calls += 1
        return dialled

    def _release(self, dialled: _Dialled) -> None:
        """A call ended. A retired channel idle now is closed by the next call or renewal, on
        its caller's thread: never on gRPC's own thread, which runs this for a stream."""
        with self._lock:
            dialled.calls -= 1

    def _close_idle(self) -> None:
        with self._lock:
            idle = [d for d in self._retired if d.calls <= 0]
            self._retired = [d for d in self._retired if d.calls > 0]
        for dialled in idle:
            dialled.channel.close()

    def _method(self, kind: str, method: str, request_serializer: Any, response_deserializer: Any,
                registered: bool) -> Any:
        return {"unary_unary": _UnaryUnary, "unary_stream": _UnaryStream,
                "stream_unary": _StreamUnary, "stream_stream": _StreamStream}[kind](
            self, kind, (method, request_serializer, response_deserializer), registered)

    def unary_unary(self, method: str, request_serializer: Any = None, response_deserializer: Any = None,
                    _registered_method: bool = False) -> grpc.UnaryUnaryMultiCallable:
        return self._method("unary_unary", method, request_serializer, response_deserializer, _registered_method)

    def unary_stream(self, method: str, request_serializer: Any = None, response_deserializer: Any = None,
                     _registered_method: bool = False) -> grpc.UnaryStreamMultiCallable:
        return self._method("unary_stream", method, request_serializer, response_deserializer, _registered_method)

    def stream_unary(self, method: str, request_serializer: Any = None, response_deserializer: Any = None,
                     _registered_method: bool = False) -> grpc.StreamUnaryMultiCallable:
        return self._method("stream_unary", method, request_serializer, response_deserializer, _registered_method)

    def stream_stream(self, method: str, request_serializer: Any = None, response_deserializer: Any = None,
                      _registered_method: bool = False) -> grpc.StreamStreamMultiCallable:
        return self._method("stream_stream", method, request_serializer, response_deserializer, _registered_method)

    # -- the channel's state ----------------------------------------------------------------
    def subscribe(self, callback: Callable[[grpc.ChannelConnectivity], None], try_to_connect: bool = False) -> None:
        with self._subscribing:
            with self._lock:
                self._subscribed[callback] = try_to_connect
                channel = self._current.channel
            channel.subscribe(callback, try_to_connect=try_to_connect)

    def unsubscribe(self, callback: Callable[[grpc.ChannelConnectivity], None]) -> None:
        with self._subscribing:
            with self._lock:
                self._subscribed.pop(callback, None)
                channel = self._current.channel
            channel.unsubscribe(callback)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            every = [self._current, *self._retired]
            self._retired = []
        for dialled in every:
            dialled.channel.close()

    def __enter__(self) -> RenewingChannel:
        return self

    def __exit__(self, exc_type: object, exc_val: object, exc_tb: object) -> None:
        self.close()


class _Renewing:
    """A method of a `RenewingChannel`: each call goes on the channel dialled with the files of
    its start, counted open until it ends (a unary call on return, a stream or future on its
    gRPC callback)."""

    def __init__(self, channel: RenewingChannel, kind: str, args: tuple[Any, ...], registered: bool) -> None:
        self._channel = channel
        self._kind = kind
        self._args = args
        self._registered = registered
        self._made: tuple[_Dialled, Any] | None = None

    def _begin(self) -> tuple[_Dialled, Any]:
        dialled = self._channel._take()
        made = self._made
        if made is None or made[0] is not dialled:
            made = (dialled, getattr(dialled.channel, self._kind)(*self._args, _registered_method=self._registered))
            self._made = made
        return made

    def _blocking(self, name: str, *args: Any, **kwargs: Any) -> Any:
        dialled, method = self._begin()
        try:
            return getattr(method, name)(*args, **kwargs)
        finally:
            self._channel._release(dialled)
            self._channel._close_idle()

    def _ongoing(self, name: str, *args: Any, **kwargs: Any) -> Any:
        dialled, method = self._begin()
        try:
            call = getattr(method, name)(*args, **kwargs)
        except BaseException:
            self._channel._release(dialled)
            raise
        if not call.add_callback(lambda: self._channel._release(dialled)):  # already over
            self._channel._release(dialled)
        return call


class _OneReply(_Renewing):
    """A method with one reply (unary or client-streaming): waited for, or a future."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._blocking("__call__", *args, **kwargs)

    def with_call(self, *args: Any, **kwargs: Any) -> Any:
        return self._blocking("with_call", *args, **kwargs)

    def future(self, *args: Any, **kwargs: Any) -> Any:
        return self._ongoing("future", *args, **kwargs)


class _Replies(_Renewing):
    """A method whose replies stream: open until its last."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._ongoing("__call__", *args, **kwargs)


class _UnaryUnary(_OneReply, grpc.UnaryUnaryMultiCallable):
    pass


class _UnaryStream(_Replies, grpc.UnaryStreamMultiCallable):
    pass


class _StreamUnary(_OneReply, grpc.StreamUnaryMultiCallable):
    pass


class _StreamStream(_Replies, grpc.StreamStreamMultiCallable):
    pass


def plaintext_peers(peers: Mapping[str, str], env: Mapping[str, str] | None = None) -> list[str]:
    """The settings of `peers` (setting -> the address this process dials another famiglia
    service by) that a process with the server pair set dials in plaintext by a bare
    `host:port`, each warned about at start (`tls_peer_plaintext`).

    The pair set in this process's environment is, in a shell (`make up`) or a compose file's
    shared environment, set for its peers too: they serve TLS only, and a plaintext client
    of them (the bots creating matches, matchmaking) is refused each handshake as UNAVAILABLE,
    which it retries without end. Loopback is no exception (`make up` from a shell with the
    pair exported serves TLS on loopback); `grpc://host:port` says plaintext on purpose and is
    not warned about."""
    env = os.environ if env is None else env
    if not _setting(CERT, env):
        return []
    found = []
    for name, address in peers.items():
        if address.startswith((TLS_SCHEME, PLAIN_SCHEME)):
            continue
        found.append(name)
        log.warning("tls_peer_plaintext", setting=name, address=address, tls_cert=_setting(CERT, env),
                    hint=f"this process serves TLS ({CERT}); if its peers do too, set {name}=grpcs://{address} "
                         f"(and {CA} to their CA); grpc://{address} dials plaintext on purpose")
    return found
