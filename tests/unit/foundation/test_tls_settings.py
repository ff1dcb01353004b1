"""Transport-security settings (famiglia.grpcutil.tls): a server's TLS pair, its client CA
and its probes' port are read and checked at start, and a bad one raises TlsSettingError with
one line naming the setting, which stops a service as famiglia.config's do (one of the pair
alone would serve plaintext; gRPC answers a key that is not the certificate's with "Failed to
bind to address", as if the port were taken); a client dials `grpcs://` over TLS, anything
else in plaintext."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from famiglia.config import listen_address
from famiglia.grpcutil import tls
from tests.support.certs import CertificateAuthority


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("pki"))


def _env(**settings: object) -> dict[str, str]:
    return {f"FAMIGLIA_{name.upper()}": str(value) for name, value in settings.items()}


def test_no_setting_serves_plaintext() -> None:
    assert tls.server_tls({}) is None
    assert tls.transport({}) == tls.Transport(None, "")
    assert tls.transport({}).shown == "off"


def test_the_pair_is_read_and_checked(ca: CertificateAuthority) -> None:
    pair = ca.issue("command")
    served = tls.transport(_env(tls_cert=pair.cert, tls_key=pair.key))
    assert served.tls is not None and served.tls.client_ca is None and served.shown == "on"
    assert served.tls.pair.certificate_chain == pair.cert.read_bytes()
    assert served.tls.pair.private_key == pair.key.read_bytes()
    assert "PRIVATE KEY" not in repr(served)  # a key never reaches a log line by a repr
    assert isinstance(served.tls.credentials(), grpc.ServerCredentials)
    mutual = tls.transport(_env(tls_cert=pair.cert, tls_key=pair.key, tls_client_ca=ca.ca))
    assert mutual.tls is not None and mutual.tls.client_ca == ca.ca.read_bytes() and mutual.shown == "mutual"


@pytest.mark.parametrize("given", ["tls_cert", "tls_key"])
def test_one_of_the_pair_alone_stops_the_service(ca: CertificateAuthority, given: str) -> None:
    pair = ca.issue("alone")
    path = pair.cert if given == "tls_cert" else pair.key
    with pytest.raises(tls.TlsSettingError, match=rf"FAMIGLIA_{given.upper()} is set but FAMIGLIA_TLS_(CERT|KEY) is not"):
        tls.transport(_env(**{given: path}))


def test_a_missing_file_stops_the_service_naming_it(ca: CertificateAuthority, tmp_path: Path) -> None:
    pair = ca.issue("missing")
    gone = tmp_path / "nowhere.pem"
    with pytest.raises(tls.TlsSettingError, match=r"FAMIGLIA_TLS_CERT='.*nowhere\.pem' cannot be read: No such file"):
        tls.transport(_env(tls_cert=gone, tls_key=pair.key))
    with pytest.raises(tls.TlsSettingError, match=r"FAMIGLIA_TLS_KEY='.*nowhere\.pem' cannot be read"):
        tls.transport(_env(tls_cert=pair.cert, tls_key=gone))
    with pytest.raises(tls.TlsSettingError, match=r"FAMIGLIA_TLS_CLIENT_CA='.*nowhere\.pem' cannot be read"):
        tls.transport(_env(tls_cert=pair.cert, tls_key=pair.key, tls_client_ca=gone))


def test_a_file_that_is_not_pem_stops_the_service(ca: CertificateAuthority, tmp_path: Path) -> None:
    pair = ca.issue("notpem")
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(tls.TlsSettingError, match=r"FAMIGLIA_TLS_CERT='.*junk\.pem' holds no PEM certificate"):
        tls.transport(_env(tls_cert=junk, tls_key=pair.key))
    with pytest.raises(tls.TlsSettingError, match=r"FAMIGLIA_TLS_KEY='.*' holds no PEM private key"):
        tls.transport(_env(tls_cert=pair.cert, tls_key=pair.cert))  # the certificate twice


def test_a_key_of_another_certificate_stops_the_service(ca: CertificateAuthority) -> None:
    """The usual slip of a rotation: the new certificate with the old key, which gRPC itself
    refuses only as "Failed to bind to address"."""
    one, other = ca.issue("one"), ca.issue("other")
    with pytest.raises(tls.TlsSettingError, match=r"FAMIGLIA_TLS_KEY='.*other-key\.pem' is not the private key of "
                                         r"FAMIGLIA_TLS_CERT='.*one\.pem'"):
        tls.transport(_env(tls_cert=one.cert, tls_key=other.key))


def test_an_encrypted_key_stops_the_service_without_a_prompt(ca: CertificateAuthority) -> None:
    """OpenSSL would ask for the passphrase on the terminal; gRPC takes no encrypted key."""
    pair = ca.issue("locked", password=b"hunter2")
    with pytest.raises(tls.TlsSettingError, match=r"FAMIGLIA_TLS_KEY='.*locked-key\.pem' is encrypted"):
        tls.transport(_env(tls_cert=pair.cert, tls_key=pair.key))


def test_a_client_ca_without_the_servers_own_pair_stops_the_service(ca: CertificateAuthority) -> None:
    with pytest.raises(tls.TlsSettingError, match="FAMIGLIA_TLS_CLIENT_CA is set but FAMIGLIA_TLS_CERT and FAMIGLIA_TLS_KEY"):
        tls.transport(_env(tls_client_ca=ca.ca))


@pytest.mark.parametrize("addr", ["50060", "health", "0.0.0.0:", "0.0.0.0:70000", ":0"])
def test_a_bad_health_address_stops_the_service(addr: str) -> None:
    with pytest.raises(tls.TlsSettingError, match=r"FAMIGLIA_HEALTH_ADDR='.*' is not HOST:PORT with a port of 1-65535"):
        tls.transport({"FAMIGLIA_HEALTH_ADDR": addr})


def test_the_health_address_binds_as_the_service_addresses_do() -> None:
    assert tls.transport({"FAMIGLIA_HEALTH_ADDR": " 0.0.0.0:8081 "}).health_address == "0.0.0.0:8081"
    assert tls.transport({"FAMIGLIA_HEALTH_ADDR": "localhost:8081"}).health_address == "127.0.0.1:8081"


@pytest.mark.parametrize(("address", "target", "secure"), [
    ("localhost:50051", "localhost:50051", False),
    ("grpc://command:50051", "command:50051", False),
    ("grpcs://play.example.com", "play.example.com:443", True),
    ("grpcs://play.example.com/", "play.example.com:443", True),
    ("grpcs://play.example.com:8443", "play.example.com:8443", True),
    ("grpcs://[::1]", "[::1]:443", True),
    ("grpcs://[::1]:8443", "[::1]:8443", True),
])
def test_a_client_dials_grpcs_over_tls_and_anything_else_in_plaintext(address: str, target: str,
                                                                    secure: bool) -> None:
    assert tls.dial_target(address) == (target, secure)


def test_a_service_listens_on_its_address_whatever_scheme_its_clients_dial() -> None:
    """One FAMIGLIA_COMMAND_ADDR=grpcs://command:50051 serves both the service and its clients."""
    assert listen_address("grpcs://command:50051") == "command:50051"
    assert listen_address("grpcs://localhost:50051") == "127.0.0.1:50051"
    assert listen_address("grpc://0.0.0.0:50051") == "0.0.0.0:50051"
    assert listen_address("grpcs://command:50051/") == "command:50051" == tls.dial_target("grpcs://command:50051/")[0]


def test_a_clients_bad_ca_stops_it_naming_the_setting(ca: CertificateAuthority, tmp_path: Path) -> None:
    with pytest.raises(tls.TlsSettingError, match=r"FAMIGLIA_TLS_CA='.*nowhere\.pem' cannot be read"):
        tls.dial("grpcs://localhost:1", env=_env(tls_ca=tmp_path / "nowhere.pem"))
    junk = tmp_path / "junk.pem"
    junk.write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    with pytest.raises(tls.TlsSettingError, match=r"FAMIGLIA_TLS_CA='.*junk\.pem' holds no usable CA certificate"):
        tls.dial("grpcs://localhost:1", env=_env(tls_ca=junk))
    # a plaintext address reads no TLS setting: the embedded stack is never stopped by one
    tls.dial("localhost:1", env=_env(tls_ca=tmp_path / "nowhere.pem")).close()


def test_the_services_own_clients_check_the_tls_settings_at_start(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Matchmaking's CreateMatch client and the bots' (whose workers dial lazily, in a task)
    follow FAMIGLIA_TLS_CA for a `grpcs://` command address, and a bad one stops them at start."""
    from famiglia.config import Settings
    from services.bots.bootstrap import bootstrap
    from services.matchmaking.creator import GrpcMatchCreator

    monkeypatch.setenv("FAMIGLIA_TLS_CA", str(tmp_path / "nowhere.pem"))
    with pytest.raises(tls.TlsSettingError, match="FAMIGLIA_TLS_CA="):
        GrpcMatchCreator("grpcs://command:50051")
    with pytest.raises(tls.TlsSettingError, match="FAMIGLIA_TLS_CA="):
        bootstrap(settings=Settings(secret="s", command_addr="grpcs://command:50051"))
    bootstrap(settings=Settings(secret="s", command_addr="command:50051")).close()  # plaintext reads none


def test_a_clients_pair_is_its_own_settings_never_the_servers(ca: CertificateAuthority) -> None:
    """A client shows FAMIGLIA_TLS_CLIENT_CERT/KEY (both or neither, checked as a server's pair
    is); a server pair in the same environment makes no client show it and no client stop."""
    pair = ca.issue("cli")
    assert isinstance(tls.client_credentials(_env(tls_cert=pair.cert)), grpc.ChannelCredentials)
    assert isinstance(tls.client_credentials(_env(tls_client_cert=pair.cert, tls_client_key=pair.key)),
                      grpc.ChannelCredentials)
    with pytest.raises(tls.TlsSettingError, match="FAMIGLIA_TLS_CLIENT_CERT is set but FAMIGLIA_TLS_CLIENT_KEY is not"):
        tls.client_credentials(_env(tls_client_cert=pair.cert))
    other = ca.issue("other")
    with pytest.raises(tls.TlsSettingError, match=r"FAMIGLIA_TLS_CLIENT_KEY='.*' is not the private key of "
                                         r"FAMIGLIA_TLS_CLIENT_CERT="):
        tls.client_credentials(_env(tls_client_cert=pair.cert, tls_client_key=other.key))


def test_the_sdk_raises_a_bad_tls_setting_for_its_caller_to_catch(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A program using the SDK gets an exception it can catch (a ValueError), not a SystemExit
    that ends it; the line is the one a service stops with."""
    from famiglia.client import GameClient

    monkeypatch.setenv("FAMIGLIA_TLS_CA", str(tmp_path / "nowhere.pem"))
    with pytest.raises(ValueError, match=r"^FAMIGLIA_TLS_CA='.*nowhere\.pem' cannot be read: No such file") as caught:
        GameClient("grpcs://play.example.com")
    assert isinstance(caught.value, tls.TlsSettingError) and not isinstance(caught.value, SystemExit)


def test_a_process_start_stops_on_a_bad_tls_setting_with_its_one_line(ca: CertificateAuthority) -> None:
    pair = ca.issue("start")
    with pytest.raises(SystemExit) as caught, tls.exit_on_bad_setting():
        tls.transport(_env(tls_cert=pair.cert))
    assert caught.value.code == ("FAMIGLIA_TLS_CERT is set but FAMIGLIA_TLS_KEY is not: TLS takes both PEM files "
                                 "(the certificate chain and its private key), or neither")
    with tls.exit_on_bad_setting():  # good settings pass through
        assert tls.transport(_env(tls_cert=pair.cert, tls_key=pair.key)).shown == "on"


def test_the_cli_stops_on_a_bad_tls_setting_with_its_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from famiglia.cli.main import main

    monkeypatch.setenv("FAMIGLIA_SECRET", "s")
    monkeypatch.setenv("FAMIGLIA_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("FAMIGLIA_TLS_CA", str(tmp_path / "nowhere.pem"))
    with pytest.raises(SystemExit, match=r"^FAMIGLIA_TLS_CA='.*nowhere\.pem' cannot be read: No such file"):
        main(["match", "--address", "grpcs://localhost:1", "cancel", "m-1", "--reason", "test"])


@pytest.mark.parametrize(("address", "warned"), [
    ("command:50051", True),
    ("localhost:50051", True),  # `make up` from a shell with the pair exported: TLS on loopback too
    ("grpcs://command:50051", False),
    ("grpc://command:50051", False),  # plaintext on purpose
])
def test_a_tls_server_dialling_a_peer_by_a_bare_address_is_warned_at_start(ca: CertificateAuthority, address: str,
                                                                           warned: bool) -> None:
    """With the pair set for every service (a shell, a compose file's shared environment) the
    command service serves TLS only, and the bots' or matchmaking's plaintext CreateMatch is
    refused at each handshake as UNAVAILABLE, retried without end and without a word."""
    import structlog

    pair = ca.issue("bots")
    with structlog.testing.capture_logs() as logs:
        found = tls.plaintext_peers({"FAMIGLIA_COMMAND_ADDR": address}, _env(tls_cert=pair.cert, tls_key=pair.key))
    assert found == (["FAMIGLIA_COMMAND_ADDR"] if warned else [])
    warnings = [e for e in logs if e["event"] == "tls_peer_plaintext"]
    assert len(warnings) == int(warned)
    if warned:
        assert warnings[0]["log_level"] == "warning" and warnings[0]["setting"] == "FAMIGLIA_COMMAND_ADDR"
        assert f"FAMIGLIA_COMMAND_ADDR=grpcs://{address}" in warnings[0]["hint"]


def test_a_plaintext_server_dialling_in_plaintext_is_not_warned() -> None:
    assert tls.plaintext_peers({"FAMIGLIA_COMMAND_ADDR": "command:50051"}, {}) == []
