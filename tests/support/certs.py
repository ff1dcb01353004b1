"""A private CA and the certificates it signs, made at test time (never checked in): what the
transport-security tests serve and dial with. `cryptography` comes with the dev extra."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("cryptography", reason="the dev extra's `cryptography` makes the test certificates")

from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: E402


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_pem(key: ec.EllipticCurvePrivateKey, password: bytes | None = None) -> bytes:
    encryption = (serialization.BestAvailableEncryption(password) if password
                  else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


class CertificateAuthority:
    """A self-signed CA, written as `<dir>/<name>-ca.pem`, that signs leaf certificates for
    localhost and 127.0.0.1 (server and client use alike, as cert-manager can issue)."""

    def __init__(self, directory: Path, name: str = "famiglia-test") -> None:
        self.dir = directory
        self.name = name
        self._key = _key()
        now = dt.datetime.now(dt.UTC)
        self._cert = (
            x509.CertificateBuilder().subject_name(_name(f"{name} CA")).issuer_name(_name(f"{name} CA"))
            .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(self._key, hashes.SHA256()))
        self.ca = directory / f"{name}-ca.pem"
        self.ca.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, common_name: str, *, password: bytes | None = None, not_before: dt.datetime | None = None,
              not_after: dt.datetime | None = None) -> Pair:
        """A leaf certificate and its key, as `<dir>/<common_name>.pem` and `...-key.pem`, valid
        from five minutes ago for 90 days (cert-manager's default) unless given its dates."""
        key = _key()
        now = dt.datetime.now(dt.UTC)
        not_before = not_before or now - dt.timedelta(minutes=5)
        not_after = not_after or now + dt.timedelta(days=90)
        cert = (
            x509.CertificateBuilder().subject_name(_name(common_name)).issuer_name(self._cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(not_before).not_valid_after(not_after)
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(self._key, hashes.SHA256()))
        pair = Pair(self.dir / f"{common_name}.pem", self.dir / f"{common_name}-key.pem")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pair.key.write_bytes(_key_pem(key, password))
        pair.key.chmod(0o600)
        return pair
