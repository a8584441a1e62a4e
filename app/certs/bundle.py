"""A CA and a serving certificate (ECDSA P-256) for the given host names, and the files they are
written to: staged, synced and renamed, the key readable by its owner only."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import logging
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

log = logging.getLogger("dra_bridge.tls")


@dataclass
class Bundle:
    ca_cert: str
    cert: str
    key: str


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def service_hosts(service: str, namespace: str) -> list[str]:
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc",
            f"{service}.{namespace}.svc.cluster.local"]


def generate(hosts: list[str], days: int = 365) -> tuple[bytes, bytes, bytes]:
    """(ca_cert_pem, cert_pem, key_pem) for a fresh CA and a serving cert for `hosts`."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder().subject_name(_name("dra-bridge-ca")).issuer_name(_name("dra-bridge-ca"))
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder().subject_name(_name(hosts[0])).issuer_name(ca_cert.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return ca_cert.public_bytes(pem), cert.public_bytes(pem), _pem_key(key)


def write_bundle(out_dir: str, hosts: list[str], days: int = 365) -> Bundle:
    """All three files or none: each is written to a temporary file first (a full disk fails
    there) and only then renamed into place, key and certificate last."""
    os.makedirs(out_dir, exist_ok=True)
    ca_pem, cert_pem, key_pem = generate(hosts, days)
    bundle = Bundle(os.path.join(out_dir, "ca.crt"), os.path.join(out_dir, "tls.crt"),
                    os.path.join(out_dir, "tls.key"))
    staged: list[tuple[str, str]] = []
    try:
        for path, data, mode in ((bundle.ca_cert, ca_pem, 0o644), (bundle.key, key_pem, 0o600),
                                 (bundle.cert, cert_pem, 0o644)):
            staged.append((_stage(path, data, mode), path))
    except OSError:
        for tmp, _path in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        with contextlib.suppress(OSError):
            os.unlink(f"{bundle.cert}.tmp")
        raise
    for tmp, path in staged:
        os.replace(tmp, path)
    return bundle


def _stage(path: str, data: bytes, mode: int) -> str:
    tmp = f"{path}.tmp"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return tmp


def ensure_dev_certs(cert_path: str, key_path: str) -> bool:
    """Generate development certs next to `cert_path` when both files are absent. True if made."""
    if os.path.exists(cert_path) or os.path.exists(key_path):
        return False
    out_dir = os.path.dirname(cert_path) or "."
    hosts = ["localhost", "127.0.0.1", "::1", *service_hosts("dra-bridge", "dra-bridge")]
    bundle = write_bundle(out_dir, hosts)
    if os.path.abspath(bundle.cert) != os.path.abspath(cert_path):
        os.replace(bundle.cert, cert_path)
    if os.path.abspath(bundle.key) != os.path.abspath(key_path):
        os.replace(bundle.key, key_path)
    log.info("generated development certificates in %s (CA: %s)", out_dir, bundle.ca_cert)
    return True
