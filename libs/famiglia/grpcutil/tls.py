"""Transport security: what a server serves TLS with, read and checked once at start, and the
one way every famiglia client dials an address (`grpcs://host[:port]` is TLS, anything else
plaintext). Seat tokens travel on every call, so an operator who exposes a server beyond
loopback serves it with TLS, here or at an Ingress in front of it (docs/architecture.md,
"Transport security").

A bad setting (one of the pair alone, a file that cannot be read or holds no PEM, a key that
is not the certificate's) stops the process with one line naming it, as famiglia.config's do:
one of the pair alone would otherwise serve plaintext, and gRPC answers a key that is not the
certificate's with a traceback of "Failed to bind to address", as if the port were taken.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

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


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate chain and its private key, checked to belong together."""

    certificate_chain: bytes
    private_key: bytes = field(repr=False)


@dataclass(frozen=True)
class ServerTls:
    """What a server serves TLS with; `client_ca`: clients must show a certificate it signed."""

    pair: KeyPair
    client_ca: bytes | None = None

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.pair.private_key, self.pair.certificate_chain)],
            root_certificates=self.client_ca, require_client_auth=self.client_ca is not None)


def _setting(name: str, env: Mapping[str, str]) -> str:
    return env.get(name, "").strip()


def _read(name: str, path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as exc:
        raise SystemExit(f"{name}={path!r} cannot be read: {exc.strerror or exc}") from None


def _pem(name: str, path: str, kind: str) -> bytes:
    """The file's bytes, which must hold a PEM block of `kind` (CERTIFICATE, PRIVATE KEY)."""
    data = _read(name, path)
    if b"-----BEGIN " not in data or f"{kind}-----".encode() not in data:
        raise SystemExit(f"{name}={path!r} holds no PEM {kind.lower()} (-----BEGIN ...{kind}-----)")
    return data


def _key_pair(env: Mapping[str, str], cert_name: str = CERT, key_name: str = KEY) -> KeyPair | None:
    """A certificate and its key (FAMIGLIA_TLS_CERT and FAMIGLIA_TLS_KEY, or the client's), both or neither."""
    cert, key = _setting(cert_name, env), _setting(key_name, env)
    if not cert and not key:
        return None
    if not cert or not key:
        given, missing = (cert_name, key_name) if cert else (key_name, cert_name)
        raise SystemExit(f"{given} is set but {missing} is not: TLS takes both PEM files "
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
            raise SystemExit(f"{key_name}={key!r} is encrypted: gRPC takes an unencrypted private key "
                             "(keep it in a Secret readable by the service alone)") from None
        raise SystemExit(f"{key_name}={key!r} is not the private key of {cert_name}={cert!r} "
                         f"({exc.reason or exc})") from None
    return KeyPair(chain, private)


def _ca(name: str, env: Mapping[str, str]) -> bytes | None:
    path = _setting(name, env)
    if not path:
        return None
    data = _pem(name, path, "CERTIFICATE")
    try:
        ssl.create_default_context(cadata=data.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError) as exc:
        raise SystemExit(f"{name}={path!r} holds no usable CA certificate ({exc})") from None
    return data


def server_tls(env: Mapping[str, str] | None = None) -> ServerTls | None:
    """The server's TLS settings, read and checked now; None: serve plaintext (the default)."""
    env = os.environ if env is None else env
    pair = _key_pair(env)
    client_ca = _ca(CLIENT_CA, env)
    if pair is None:
        if client_ca is not None:
            raise SystemExit(f"{CLIENT_CA} is set but {CERT} and {KEY} are not: "
                             "mutual TLS needs the server's own certificate and key")
        return None
    return ServerTls(pair, client_ca)


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
        raise SystemExit(f"{HEALTH_ADDR}={addr!r} is not HOST:PORT with a port of 1-65535")
    return f"127.0.0.1:{port}" if host in ("localhost", "127.0.0.1") else addr


def transport(env: Mapping[str, str] | None = None) -> Transport:
    """A server's transport settings (FAMIGLIA_TLS_CERT/KEY/CLIENT_CA, FAMIGLIA_HEALTH_ADDR),
    read and checked now, at start."""
    env = os.environ if env is None else env
    return Transport(server_tls(env), _health_address(env))


def client_credentials(env: Mapping[str, str] | None = None) -> grpc.ChannelCredentials:
    """A TLS client's credentials: trusting FAMIGLIA_TLS_CA (a private CA) or else the system's
    roots, and showing FAMIGLIA_TLS_CLIENT_CERT/KEY to a server that asks for a client
    certificate (mutual TLS; a server that does not ask never sees it)."""
    env = os.environ if env is None else env
    roots = _ca(CA, env)
    pair = _key_pair(env, CLIENT_CERT, CLIENT_KEY)
    if pair is None:
        return grpc.ssl_channel_credentials(root_certificates=roots)
    return grpc.ssl_channel_credentials(root_certificates=roots, private_key=pair.private_key,
                                        certificate_chain=pair.certificate_chain)


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
    so the SDK, the CLI and the services' clients of each other follow the same settings."""
    target, secure = dial_target(address)
    if secure:
        return grpc.secure_channel(target, client_credentials(env), options=options)
    return grpc.insecure_channel(target, options=options)
