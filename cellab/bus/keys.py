"""CURVE key pairs in ZeroMQ's certificate format: NAME.key (public) and NAME.key_secret (0600)."""

from __future__ import annotations

import datetime
import hashlib
import os
import stat
import struct
import warnings
from pathlib import Path


from cellab.errors import InputError
from cellab.inputs import name_problem, read_text

PUBLIC_SUFFIX = ".key"
SECRET_SUFFIX = ".key_secret"
KEY_MAX_BYTES = 64 << 10  # a certificate is a few hundred bytes


def default_keys_dir() -> Path:
    """$CELLAB_KEYS_DIR, else ~/.config/cellab/keys."""
    env = os.environ.get("CELLAB_KEYS_DIR")
    return Path(env) if env else Path.home() / ".config" / "cellab" / "keys"


def fingerprint(public_key: bytes) -> str:
    """A short, non-secret name for a public key (z85 text), for logs."""
    return hashlib.sha256(public_key).hexdigest()[:16]


def agent_line(name: str, role: str, controller: str, key_fingerprint: str) -> str:
    """An agent's start line: it prints this when it starts, the controller logs it when the agent connects."""
    return f"agent {name}: role {role}, controller {controller}, key {key_fingerprint}"


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
    """Make NAME.key and NAME.key_secret in `directory`; returns (public, secret). A missing directory is
    created 0700; an existing one keeps its mode (a shared /tmp keeps its sticky bit): if others may write
    to it, a warning says so."""
    problem = name_problem(name, lead_alnum=False) or ("starts with '.'" if name.startswith(".") else None)
    if problem:  # str.isalnum() took Cyrillic and other look-alike letters: the shared check names them
        raise InputError("cellab keys", "name", f"the key name {problem}",
                         ["ASCII letters, digits, '-', '_', '.' (not starting with '.'), 1..64 characters"])
    directory = Path(directory)
    prepare_keys_dir(directory)
    public_path = directory / f"{name}{PUBLIC_SUFFIX}"
    secret_path = directory / f"{name}{SECRET_SUFFIX}"
    if not overwrite:
        for path in (public_path, secret_path):
            if path.exists():
                raise InputError(path, "name", "key file exists; pass --force to replace it")
    import zmq  # here, not at import: inventories and the CLI check key files without ZeroMQ's sockets

    public_key, secret_key = zmq.curve_keypair()
    _write_new(secret_path, _cert_text("**Secret**", public_key, secret_key), 0o600, overwrite)
    _write_new(public_path, _cert_text("Public", public_key, None), 0o644, overwrite)
    return public_path, secret_path


def prepare_keys_dir(directory: Path) -> None:
    """Create a missing key folder (and parents) 0700; leave an existing one's mode as it is, warning when
    group or others may write to it; a path that is not a folder is an InputError."""
    if directory.exists() or directory.is_symlink():
        if not directory.is_dir():
            raise InputError(directory, "--dir", "is not a folder", ["a folder (created 0700 if missing)"])
        mode = stat.S_IMODE(directory.stat().st_mode)
        if mode & 0o022:
            warnings.warn(f"{directory}: key folder is writable by {'others' if mode & 0o002 else 'its group'} "
                          f"(mode {mode:o}); its mode is left unchanged: keep secret keys in a 0700 folder",
                          KeyFolderWarning, stacklevel=3)
        return
    try:
        directory.mkdir(parents=True, mode=0o700)
        os.chmod(directory, 0o700)  # mkdir's mode is masked by the umask
    except OSError as exc:
        raise InputError(directory, "--dir", f"cannot create the key folder: {exc.strerror}") from None


class KeyFolderWarning(UserWarning):
    """The key folder's mode lets others write to it."""


def parse_certificate(text: str, source: str | Path, field: str) -> tuple[bytes, bytes | None]:
    """(public, secret or None) from ZeroMQ certificate text; each key must be a CURVE key (40 z85
    characters that decode to 32 bytes)."""
    keys: dict[str, bytes] = {}
    for line in text.splitlines():
        line = line.strip()
        for kind in ("public-key", "secret-key"):
            if line.startswith(kind) and "=" in line and kind not in keys:
                keys[kind] = line.split("=", 1)[1].strip(" \t'\"").encode("ascii", "replace")
    if "public-key" not in keys:
        raise InputError(source, field, "not a ZeroMQ CURVE certificate (no public-key line); make one with "
                         "`cellab keys NAME`", ["NAME.key", "NAME.key_secret"])
    for kind, key in keys.items():
        if not _is_curve_key(key):
            raise InputError(source, field, f"{kind} is not a CURVE key", ["40 z85 characters (32 bytes)"])
    return keys["public-key"], keys.get("secret-key")


def _is_curve_key(key: bytes) -> bool:
    if len(key) != 40:
        return False
    try:
        from zmq.utils import z85

        return len(z85.decode(key)) == 32
    except (ValueError, KeyError, TypeError, struct.error):
        return False


def _load(path: Path, field: str) -> tuple[bytes, bytes | None]:
    path = Path(path)
    try:
        found = path.exists()
    except OSError as exc:  # a name too long, a loop of links: exists() raises rather than say no
        raise InputError(str(path)[:200], field, f"cannot read: {exc.strerror or exc}") from None
    if not found:
        raise InputError(path, field, "key file not found; make one with `cellab keys NAME`")
    return parse_certificate(read_text(path, KEY_MAX_BYTES, field), path, field)


def holds_secret_key(path: Path) -> bool:
    """The key file holds a secret key (whatever its name): it is no file to hand to another host."""
    return bool(_load(path, "public-key")[1])


def check_key_file(path: Path, source: str | Path, field: str, *, secret: bool) -> None:
    """A key file an inventory names: a CURVE certificate (with its secret key when `secret`), else an
    InputError naming the inventory, the field and the key file."""
    try:
        if secret:
            load_secret_key(path)
        else:
            load_public_key(path)
    except InputError as exc:
        raise InputError(source, field, f"{path}: {exc.message}", exc.allowed) from None


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
