"""Certificates and keys for a loopback control plane: a CA, the API server's serving certificate, an admin
client certificate (group system:masters) and the service-account signing key.

Written to files because the Go binaries read them from disk; nothing here leaves the temporary directory.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The one client name the API server accepts X-Remote-* headers from (--requestheader-allowed-names): the same CA
# signs the admin certificate, whose headers must not count.
PROXY_CLIENT_NAME = "front-proxy-client"


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_key: Path  # RSA private key: signs service-account tokens
    sa_pub: Path  # its public half: verifies them
    # The aggregation layer's client certificate (--proxy-client-*): how the API server proves to an
    # aggregated API server (Kueue's visibility server) that the X-Remote-User headers are its own.
    proxy_cert: Path
    proxy_key: Path


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _issue(
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    *,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    usage: list[x509.ObjectIdentifier] | None,
    sans: list[x509.GeneralName] | None = None,
    ca: bool = False,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    b = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        # A little slack backwards: the API server rejects certificates "not yet valid" by a second.
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        b = b.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    if usage:
        b = b.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def make_pki(directory: Path) -> Pki:
    """Return the paths of a fresh CA, serving and admin certificates and service-account keys in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("watchtower-e2e-ca")
    ca = _issue(ca_name, ca_key.public_key(), issuer=ca_name, issuer_key=ca_key, usage=None, ca=True)

    serving_key = ec.generate_private_key(ec.SECP256R1())
    serving = _issue(
        _name("kube-apiserver"),
        serving_key.public_key(),
        issuer=ca_name,
        issuer_key=ca_key,
        usage=[ExtendedKeyUsageOID.SERVER_AUTH],
        sans=[
            x509.DNSName("localhost"),
            x509.DNSName("kubernetes.default.svc"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        ],
    )
    admin_key = ec.generate_private_key(ec.SECP256R1())
    admin = _issue(
        _name("watchtower-e2e-admin", "system:masters"),
        admin_key.public_key(),
        issuer=ca_name,
        issuer_key=ca_key,
        usage=[ExtendedKeyUsageOID.CLIENT_AUTH],
    )
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    proxy_key = ec.generate_private_key(ec.SECP256R1())
    proxy = _issue(
        _name(PROXY_CLIENT_NAME),
        proxy_key.public_key(),
        issuer=ca_name,
        issuer_key=ca_key,
        usage=[ExtendedKeyUsageOID.CLIENT_AUTH],
    )

    p = Pki(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        admin_cert=directory / "admin.crt",
        admin_key=directory / "admin.key",
        sa_key=directory / "sa.key",
        sa_pub=directory / "sa.pub",
        proxy_cert=directory / "front-proxy-client.crt",
        proxy_key=directory / "front-proxy-client.key",
    )
    pem = serialization.Encoding.PEM
    p.ca_cert.write_bytes(ca.public_bytes(pem))
    p.ca_key.write_bytes(_pem_key(ca_key))
    p.serving_cert.write_bytes(serving.public_bytes(pem))
    p.serving_key.write_bytes(_pem_key(serving_key))
    p.admin_cert.write_bytes(admin.public_bytes(pem))
    p.admin_key.write_bytes(_pem_key(admin_key))
    p.sa_key.write_bytes(_pem_key(sa_key))
    p.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    p.proxy_cert.write_bytes(proxy.public_bytes(pem))
    p.proxy_key.write_bytes(_pem_key(proxy_key))
    for key in (p.ca_key, p.serving_key, p.admin_key, p.sa_key, p.proxy_key):
        key.chmod(0o600)
    return p


def issue_serving_pair(pki: Pki, directory: Path, cn: str, *, dns: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """Write `directory`/tls.crt and tls.key: a serving certificate for localhost/127.0.0.1 from `pki`'s CA.

    For servers beside the control plane (Kueue's webhook, metrics and visibility endpoints) that want the
    names a Secret volume would give them.
    """
    ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{pki.ca_key}: expected the EC key make_pki writes")
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _issue(
        _name(cn),
        key.public_key(),
        issuer=ca.subject,
        issuer_key=ca_key,
        usage=[ExtendedKeyUsageOID.SERVER_AUTH],
        sans=[
            x509.DNSName("localhost"),
            *(x509.DNSName(d) for d in dns),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        ],
    )
    directory.mkdir(parents=True, exist_ok=True)
    crt, tls_key = directory / "tls.crt", directory / "tls.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    tls_key.write_bytes(_pem_key(key))
    tls_key.chmod(0o600)
    return crt, tls_key
