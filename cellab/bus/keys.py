"""CURVE key pairs in ZeroMQ's certificate format: NAME.key (public) and NAME.key_secret (0600)."""

from __future__ import annotations

import datetime
import hashlib
import os
import stat
from pathlib import Path

import zmq
import zmq.auth

from cellab.errors import InputError

PUBLIC_SUFFIX = ".key"
SECRET_SUFFIX = ".key_secret"


def default_keys_dir() -> Path:
    """$CELLAB_KEYS_DIR, else ~/.config/cellab/keys."""
    env = os.environ.get("CELLAB_KEYS_DIR")
    return Path(env) if env else Path.home() / ".config" / "cellab" / "keys"


def fingerprint(public_key: bytes) -> str:
    """A short, non-secret name for a public key (z85 text), for logs."""
    return hashlib.sha256(public_key).hexdigest()[:16]


def _cert_text(kind: str, public_key: bytes, secret_key: bytes | None) -> str:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
    lines = [
        f"#   ****  Generated on {stamp} by cellab  ****",
        f"#   ZeroMQ CURVE {kind} Certificate",
    ]
    if secret_key is not None:
        lines.append("#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.")
    lines += ["", "metadata", "curve", f'    public-key = "{public_key.decode()}"']
    if secret_key is not None:
        lines.append(f'    secret-key = "{secret_key.decode()}"')
    return "\n".join(lines) + "\n"


def _write_new(path: Path, text: str, mode: int, overwrite: bool) -> None:
    # The file is created with its final mode, so a secret is never readable by others, not even briefly.
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(tmp, mode)
    if not overwrite and path.exists():
        tmp.unlink()
        raise InputError(path, "name", "key file exists; pass --force to replace it")
    os.replace(tmp, path)


def generate_keypair(directory: Path, name: str, *, overwrite: bool = False) -> tuple[Path, Path]:
    """Make NAME.key and NAME.key_secret in `directory` (created 0700); returns (public, secret)."""
    if not name or not all(c.isalnum() or c in "-_." for c in name) or name.startswith("."):
        raise InputError("cellab keys", "name", f"{name!r} is not a valid key name",
                         ["letters, digits, '-', '_', '.' (not starting with '.')"])
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(directory, 0o700)
    public_path = directory / f"{name}{PUBLIC_SUFFIX}"
    secret_path = directory / f"{name}{SECRET_SUFFIX}"
    if not overwrite:
        for path in (public_path, secret_path):
            if path.exists():
                raise InputError(path, "name", "key file exists; pass --force to replace it")
    public_key, secret_key = zmq.curve_keypair()
    _write_new(secret_path, _cert_text("**Secret**", public_key, secret_key), 0o600, overwrite)
    _write_new(public_path, _cert_text("Public", public_key, None), 0o644, overwrite)
    return public_path, secret_path


def _load(path: Path, field: str) -> tuple[bytes, bytes | None]:
    path = Path(path)
    if not path.is_file():
        raise InputError(path, field, "key file not found; make one with `cellab keys NAME`")
    try:
        public_key, secret_key = zmq.auth.load_certificate(path)
    except (ValueError, OSError) as exc:
        raise InputError(path, field, f"not a ZeroMQ certificate ({exc})") from None
    if not public_key or len(public_key) != 40:
        raise InputError(path, field, "public-key is missing or not 40 z85 characters")
    return public_key, secret_key


def load_public_key(path: Path) -> bytes:
    """The z85 public key of a certificate (public or secret file)."""
    return _load(path, "public-key")[0]


def load_secret_key(path: Path) -> tuple[bytes, bytes]:
    """(public, secret) z85 keys from a NAME.key_secret file that only its owner can read."""
    path = Path(path)
    public_key, secret_key = _load(path, "secret-key")
    if not secret_key or len(secret_key) != 40:
        raise InputError(path, "secret-key", "secret-key is missing: pass the NAME.key_secret file")
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise InputError(path, "mode", f"secret key file is readable by others (mode {mode:o})", ["600", "400"])
    return public_key, secret_key
