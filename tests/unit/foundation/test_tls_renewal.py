"""A server's certificate over the months it serves (famiglia.grpcutil.tls): its dates are
checked at start (an expired or not-yet-valid one stops the service with one line; one near
its end is warned about), and a renewed one (cert-manager rewrites the Secret's files weeks
before the end) is served without a restart, while files that do not hold (half written, a
key of another certificate, expired) leave the old one served, with one warning per change."""

from __future__ import annotations

import datetime as dt
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
import structlog

from famiglia.grpcutil import tls
from tests.support.certs import CertificateAuthority, Pair

pytest.importorskip("cryptography")
from cryptography import x509  # noqa: E402


def _now() -> dt.datetime:
    """Now, read at each use: a module constant was taken at collection, minutes before a test of
    a long run issued certificates valid from five minutes before the real now (not yet valid)."""
    return dt.datetime.now(dt.UTC)


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("renewed"), "renewed")


def _env(pair: Pair, **more: object) -> dict[str, str]:
    return {tls.CERT: str(pair.cert), tls.KEY: str(pair.key), **{k: str(v) for k, v in more.items()}}


# -- the dates, read with the standard library -------------------------------------------------

@pytest.mark.parametrize(("not_before", "not_after"), [
    (None, None),
    (dt.datetime(2001, 2, 3, 4, 5, 6, tzinfo=dt.UTC), dt.datetime(2049, 12, 31, 23, 59, 59, tzinfo=dt.UTC)),
    (dt.datetime(1999, 1, 1, tzinfo=dt.UTC), dt.datetime(2061, 7, 8, 9, 10, 11, tzinfo=dt.UTC)),  # GeneralizedTime
])
def test_the_dates_read_are_the_certificates_own(ca: CertificateAuthority, not_before: dt.datetime | None,
                                                  not_after: dt.datetime | None) -> None:
    """UTCTime (to 2049) and GeneralizedTime (from 2050), as `cryptography` reads them; the first
    certificate of a chain is the server's own."""
    pair = ca.issue("dated", not_before=not_before, not_after=not_after)
    chain = pair.cert.read_bytes() + ca.ca.read_bytes()
    made = x509.load_pem_x509_certificate(pair.cert.read_bytes())
    assert tls.validity(chain) == (made.not_valid_before_utc, made.not_valid_after_utc)
    assert tls.validity(b"subject=CN = dated\n" + chain)[1] == made.not_valid_after_utc  # text before the PEM


def test_an_expired_certificate_stops_the_service_naming_its_dates(ca: CertificateAuthority) -> None:
    old = ca.issue("old", not_before=dt.datetime(2020, 1, 1, tzinfo=dt.UTC),
                   not_after=dt.datetime(2020, 3, 31, 12, 0, tzinfo=dt.UTC))
    with pytest.raises(tls.TlsSettingError, match=r"^FAMIGLIA_TLS_CERT='.*old\.pem' expired on 2020-03-31 12:00 UTC "
                                                  r"\(valid from 2020-01-01 00:00 UTC\): renew it$"):
        tls.transport(_env(old))


def test_a_certificate_not_yet_valid_stops_the_service_naming_its_dates(ca: CertificateAuthority) -> None:
    early = ca.issue("early", not_before=_now() + dt.timedelta(days=2), not_after=_now() + dt.timedelta(days=90))
    with pytest.raises(tls.TlsSettingError, match=r"FAMIGLIA_TLS_CERT='.*early\.pem' is not valid before "
                                                  r"\d{4}-\d\d-\d\d \d\d:\d\d UTC \(until .*; is this host's clock right\?\)"):
        tls.transport(_env(early))


def test_a_clients_expired_certificate_is_refused_before_any_handshake(ca: CertificateAuthority) -> None:
    """The server would refuse it at each handshake, as a bare UNAVAILABLE."""
    old = ca.issue("old-client", not_before=_now() - dt.timedelta(days=90), not_after=_now() - dt.timedelta(days=1))
    with pytest.raises(tls.TlsSettingError, match=r"FAMIGLIA_TLS_CLIENT_CERT='.*old-client\.pem' expired on"):
        tls.client_credentials({tls.CLIENT_CERT: str(old.cert), tls.CLIENT_KEY: str(old.key)})


def test_a_certificate_near_its_end_is_warned_about_at_start(ca: CertificateAuthority) -> None:
    ending = ca.issue("ending", not_after=_now() + dt.timedelta(days=3))
    with structlog.testing.capture_logs() as logs:
        served = tls.transport(_env(ending))
    assert served.tls is not None and served.tls.pair.not_after is not None
    [warning] = [e for e in logs if e["event"] == "tls_certificate_ending"]
    assert warning["log_level"] == "warning" and warning["setting"] == "FAMIGLIA_TLS_CERT"
    assert 2.9 < warning["days_left"] <= 3.0 and warning["path"] == str(ending.cert)
    with structlog.testing.capture_logs() as logs:
        tls.transport(_env(ca.issue("fresh", not_after=_now() + dt.timedelta(days=60))))
    assert not [e for e in logs if e["event"] == "tls_certificate_ending"]


# -- renewal while serving ----------------------------------------------------------------------

class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _install(pair: Pair, where: Path) -> Pair:
    """The pair copied where the server reads it (a Secret's files)."""
    where.mkdir(parents=True, exist_ok=True)
    served = Pair(where / "tls.crt", where / "tls.key")
    shutil.copyfile(pair.cert, served.cert)
    shutil.copyfile(pair.key, served.key)
    return served


def _renewal(files: Pair, clock: _Clock, now: Callable[[], dt.datetime] = _now) -> tls.Renewal:
    served = tls.server_tls(_env(files))
    assert served is not None
    return tls.Renewal(served, check_every=1.0, clock=clock, now=now)


def _serving(ca: CertificateAuthority, where: Path, now: Callable[[], dt.datetime] = _now,
             **issued: Any) -> tuple[_Clock, Pair, tls.Renewal]:
    """A server's pair "a" installed in `where` and its renewal, on a clock of the test's own."""
    clock = _Clock()
    files = _install(ca.issue("a", **issued), where)
    return clock, files, _renewal(files, clock, now)


def _refusals(logs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [e for e in logs if e["event"] == "tls_renewal_refused"]


def test_unchanged_files_are_not_read_again(ca: CertificateAuthority, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Each new connection asks; the answer is None (keep serving) after a `stat` of each file."""
    clock, _, renewal = _serving(ca, tmp_path)

    def no_read(*_: object) -> None:
        raise AssertionError("read again though unchanged")

    monkeypatch.setattr(tls, "_read_server_tls", no_read)
    for _ in range(5):
        clock.t += 2
        assert renewal.fetch() is None


def test_a_renewed_pair_is_served_once_its_files_change(ca: CertificateAuthority, other_ca: CertificateAuthority,
                                                        tmp_path: Path) -> None:
    clock, files, renewal = _serving(ca, tmp_path)
    first = renewal.served
    renewed = other_ca.issue("b")
    _install(renewed, tmp_path)
    assert renewal.fetch() is None  # at most once a second: not looked at yet
    clock.t += 1.0
    with structlog.testing.capture_logs() as logs:
        answer = renewal.fetch()
    assert isinstance(answer, grpc.ServerCertificateConfiguration)
    assert renewal.served.pair.certificate_chain == renewed.cert.read_bytes() != first.pair.certificate_chain
    assert [e["event"] for e in logs] == ["tls_certificate_renewed"]
    clock.t += 1.0
    assert renewal.fetch() is None  # served now: nothing new
    os.utime(files.cert)  # touched, the same pair
    clock.t += 1.0
    assert renewal.fetch() is None


def test_a_kubernetes_secret_volume_swap_is_a_renewal(ca: CertificateAuthority, other_ca: CertificateAuthority,
                                                      tmp_path: Path) -> None:
    """A Secret volume's files are links through `..data`, swapped at once to a new directory."""
    _install(ca.issue("a"), tmp_path / "..v1")
    (tmp_path / "..data").symlink_to("..v1")
    for name in ("tls.crt", "tls.key"):
        (tmp_path / name).symlink_to(f"..data/{name}")
    clock = _Clock()
    renewal = _renewal(Pair(tmp_path / "tls.crt", tmp_path / "tls.key"), clock)
    renewed = _install(other_ca.issue("b"), tmp_path / "..v2")
    (tmp_path / "..data_tmp").symlink_to("..v2")
    os.replace(tmp_path / "..data_tmp", tmp_path / "..data")
    clock.t += 1.0
    assert renewal.fetch() is not None
    assert renewal.served.pair.certificate_chain == renewed.cert.read_bytes()


def _half_written(pair: Pair, files: Pair) -> None:
    data = pair.cert.read_bytes()
    files.cert.write_bytes(data[: len(data) // 2])


def _key_of_the_old(pair: Pair, files: Pair) -> None:
    shutil.copyfile(pair.cert, files.cert)  # the certificate written, its key not yet


def _junk(pair: Pair, files: Pair) -> None:
    files.cert.write_text("not a certificate\n")


def _gone(pair: Pair, files: Pair) -> None:
    files.key.unlink()


@pytest.mark.parametrize("rewrite", [_half_written, _key_of_the_old, _junk, _gone])
def test_a_bad_rewrite_keeps_the_old_pair_served_with_one_warning(rewrite, ca: CertificateAuthority,  # type: ignore[no-untyped-def]
                                                                  other_ca: CertificateAuthority,
                                                                  tmp_path: Path) -> None:
    clock, files, renewal = _serving(ca, tmp_path)
    first = renewal.served
    renewed = other_ca.issue("b")
    rewrite(renewed, files)
    with structlog.testing.capture_logs() as logs:
        for _ in range(4):  # connections keep coming
            clock.t += 1.0
            assert renewal.fetch() is None
    assert renewal.served is first
    [warning] = _refusals(logs)
    assert warning["log_level"] == "warning" and "FAMIGLIA_TLS_" in str(warning["reason"]), warning
    _install(renewed, tmp_path)  # the rewrite completed
    clock.t += 1.0
    assert renewal.fetch() is not None
    assert renewal.served.pair.certificate_chain == renewed.cert.read_bytes()


def test_each_bad_change_is_warned_about_once(ca: CertificateAuthority, tmp_path: Path) -> None:
    clock, files, renewal = _serving(ca, tmp_path)
    with structlog.testing.capture_logs() as logs:
        for text in ("junk one\n", "junk two, longer\n"):
            files.cert.write_text(text)
            for _ in range(3):
                clock.t += 1.0
                assert renewal.fetch() is None
    assert len(_refusals(logs)) == 2


def test_an_expired_renewal_keeps_the_old_pair_served(ca: CertificateAuthority, tmp_path: Path) -> None:
    clock, files, renewal = _serving(ca, tmp_path)
    first = renewal.served
    _install(ca.issue("stale", not_before=_now() - dt.timedelta(days=90), not_after=_now() - dt.timedelta(days=1)),
             tmp_path)
    clock.t += 1.0
    with structlog.testing.capture_logs() as logs:
        assert renewal.fetch() is None
    assert renewal.served is first
    [warning] = _refusals(logs)
    assert "expired on" in str(warning["reason"])


def test_a_renewal_not_yet_valid_is_served_once_it_is(ca: CertificateAuthority, tmp_path: Path) -> None:
    """Issued by a CA whose clock runs ahead: no file changes again when it becomes valid."""
    now = [_now()]
    clock, files, renewal = _serving(ca, tmp_path, lambda: now[0])
    early = ca.issue("early", not_before=_now() + dt.timedelta(minutes=10))
    _install(early, tmp_path)
    clock.t += 1.0
    assert renewal.fetch() is None
    now[0] += dt.timedelta(minutes=11)
    clock.t += 1.0
    assert renewal.fetch() is not None
    assert renewal.served.pair.certificate_chain == early.cert.read_bytes()


def test_a_served_certificate_nearing_its_end_is_warned_about_once(ca: CertificateAuthority, tmp_path: Path) -> None:
    """Months after start, a renewal that never reached the server (a Secret mounted by subPath
    is never updated) is told two weeks before every client is refused."""
    now = [_now()]
    clock, _, renewal = _serving(ca, tmp_path, lambda: now[0], not_after=_now() + dt.timedelta(days=20))
    with structlog.testing.capture_logs() as logs:
        clock.t += 1.0
        renewal.fetch()
        now[0] += dt.timedelta(days=7)
        for _ in range(3):
            clock.t += 1.0
            renewal.fetch()
    assert [e["event"] for e in logs] == ["tls_certificate_ending"]


def _being_written(changes: int) -> Callable[[Sequence[str]], tuple[object, ...]]:
    """`_stamp` of files whose next `changes` looks each find them changed (still being written)."""
    real, looks = tls._stamp, iter(range(changes))
    return lambda paths: (*real(paths), next(looks, "written"))


def test_files_changing_while_read_are_read_again_without_a_warning(ca: CertificateAuthority,
                                                                    other_ca: CertificateAuthority,
                                                                    tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The pair is checked by path after its bytes were read: read across a rewrite, the bytes
    could be the old certificate and the new key, which the check by path would not see."""
    clock, files, renewal = _serving(ca, tmp_path)
    first = renewal.served
    renewed = other_ca.issue("b")
    _install(renewed, tmp_path)
    monkeypatch.setattr(tls, "_stamp", _being_written(3))
    with structlog.testing.capture_logs() as logs:
        clock.t += 1.0
        assert renewal.fetch() is None
        assert renewal.served is first
        clock.t += 1.0
        assert renewal.fetch() is not None  # held still since
    assert [e["event"] for e in logs] == ["tls_certificate_renewed"]
    assert renewal.served.pair.certificate_chain == renewed.cert.read_bytes()


def test_files_changing_as_the_service_starts_are_read_once_they_hold_still(ca: CertificateAuthority,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tls, "_stamp", _being_written(3))
    assert tls.server_tls(_env(ca.issue("a"))) is not None
    monkeypatch.setattr(tls, "_stamp", _being_written(100))
    with pytest.raises(tls.TlsSettingError, match="FAMIGLIA_TLS_CERT and its key changed while read"):
        tls.server_tls(_env(ca.issue("a")))


def test_a_failure_to_look_never_fails_a_connection(ca: CertificateAuthority, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    clock, _, renewal = _serving(ca, tmp_path)

    def broken(_: object) -> None:
        raise RuntimeError("stat broke")

    monkeypatch.setattr(tls, "_stamp", broken)
    clock.t += 1.0
    with structlog.testing.capture_logs() as logs:
        assert renewal.fetch() is None
    assert [e["event"] for e in logs] == ["tls_renewal_failed"]


def test_the_credentials_of_files_follow_them_and_of_a_pair_in_code_do_not(ca: CertificateAuthority) -> None:
    served = tls.server_tls(_env(ca.issue("a")))
    assert served is not None and served.files == ((tls.CERT, str(ca.dir / "a.pem")), (tls.KEY, str(ca.dir / "a-key.pem")))
    assert isinstance(served.credentials(), grpc.ServerCredentials)
    in_code = tls.ServerTls(served.pair)
    assert isinstance(in_code.credentials(), grpc.ServerCredentials)
