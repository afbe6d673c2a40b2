"""Certificates for a cluster's Dask traffic (`cellab tls DIR`): a private CA and one certificate it signs,
used by the scheduler, every worker and the controller. Dask's TLS checks both ends against the CA, so only
hosts holding a certificate from this CA join — as the agents' bus admits only listed CURVE keys.

    ca.pem              the CA certificate (copy it to every host)
    ca.key              the CA's private key (0600; stays where certificates are made)
    node.pem, node.key  the certificate and key every cluster process presents (0600 key)

Start the scheduler with `dask scheduler --tls-ca-file ca.pem --tls-cert node.pem --tls-key node.key`.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import socket
from pathlib import Path
from typing import Any

from cellab.errors import CellabError, InputError

VALID_DAYS = 365
FILES = ("ca.pem", "ca.key", "node.pem", "node.key")


def _write(path: Path, data: bytes, secret: bool) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    fd = os.open(path, flags, 0o600 if secret else 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def make_certs(folder: Path, hosts: list[str] | None = None) -> dict[str, Path]:
    """A new CA and node certificate in `folder` (created 0700); existing files are never overwritten."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder = Path(folder)
    if folder.is_symlink():
        raise InputError(folder, "", "is a symbolic link; give a real folder")
    taken = [name for name in FILES if (folder / name).exists() or (folder / name).is_symlink()]
    if taken:
        raise InputError(folder, taken[0], "already exists; certificates are never overwritten",
                         ["an empty or new folder"])
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    names = ["localhost", socket.gethostname(), *(hosts or [])]
    alt: list[Any] = []
    for name in dict.fromkeys(names):
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alt.append(x509.DNSName(name))
    alt.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cellab cluster CA")])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=VALID_DAYS))
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .sign(ca_key, hashes.SHA256()))
    node_key = ec.generate_private_key(ec.SECP256R1())
    node_cert = (x509.CertificateBuilder()
                 .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cellab node")]))
                 .issuer_name(ca_name).public_key(node_key.public_key()).serial_number(x509.random_serial_number())
                 .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=VALID_DAYS))
                 .add_extension(x509.SubjectAlternativeName(alt), critical=False)
                 .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                 .sign(ca_key, hashes.SHA256()))

    def key_bytes(key: Any) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    out = {name: folder / name for name in FILES}
    _write(out["ca.pem"], ca_cert.public_bytes(serialization.Encoding.PEM), False)
    _write(out["ca.key"], key_bytes(ca_key), True)
    _write(out["node.pem"], node_cert.public_bytes(serialization.Encoding.PEM), False)
    _write(out["node.key"], key_bytes(node_key), True)
    return out


def _files(folder: Path) -> tuple[str, str, str]:
    folder = Path(folder)
    for name in ("ca.pem", "node.pem", "node.key"):
        if not (folder / name).is_file():
            raise InputError(folder, name, "missing", ["a folder made by `cellab tls DIR`"])
    key = folder / "node.key"
    if key.stat().st_mode & 0o077:
        raise CellabError(f"{key}: readable by others (mode {oct(key.stat().st_mode & 0o777)}); chmod 600 it")
    return str(folder / "ca.pem"), str(folder / "node.pem"), str(key)


def client_security(folder: Path) -> Any:
    from distributed.security import Security

    ca, cert, key = _files(folder)
    return Security(tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key, require_encryption=True)


def worker_security(folder: Path) -> Any:
    from distributed.security import Security

    ca, cert, key = _files(folder)
    return Security(tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key, tls_worker_cert=cert,
                    tls_worker_key=key, require_encryption=True)
