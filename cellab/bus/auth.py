"""Who may speak to the controller: the CURVE allowlist of agent keys (checked by ZAP), and the names
bound to a key of their own (NAME.key: only that key may speak as agent NAME)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import zmq

from cellab.bus.keys import PUBLIC_SUFFIX, default_keys_dir, fingerprint, load_public_key, load_secret_key
from cellab.errors import InputError

log = logging.getLogger("cellab.bus.controller")

REJECT_LOG_EVERY_S = 10.0


class Allowlist:
    """ZAP callback: only allowed agent keys pass; rejections are logged by fingerprint, rate-limited."""

    def __init__(self, keys: set[bytes]):
        self.keys = keys
        self._last_log: dict[bytes, float] = {}
        self._counts: dict[bytes, int] = {}

    def callback(self, domain: str, key: bytes) -> bool:
        if key in self.keys:
            return True
        self._counts[key] = self._counts.get(key, 0) + 1
        now = time.monotonic()
        if now - self._last_log.get(key, -1e9) >= REJECT_LOG_EVERY_S:
            self._last_log[key] = now
            fp = fingerprint(key)
            log.warning("rejected a connection with an unknown CURVE key %s (%d attempts)", fp, self._counts[key],
                        extra={"event": "curve_rejected", "fingerprint": fp, "attempts": self._counts[key]})
        return False


def load_controller_keys(secret_key_file: Path | None, allowed_agent_keys: list[Path] | None,
                         ) -> tuple[tuple[bytes, bytes], set[bytes], dict[str, str]]:
    """The controller's key pair, the allowed agent keys, and {NAME: z85 key} for every NAME.key."""
    source = "controller"
    keys_dir = default_keys_dir()
    keys = load_secret_key(Path(secret_key_file) if secret_key_file else keys_dir / "controller.key_secret")
    paths = (allowed_agent_keys if allowed_agent_keys is not None
             else sorted(p for p in keys_dir.glob("*.key") if p.name != "controller.key"))
    if not paths:
        raise InputError(source, "allowed_agent_keys", "empty allowlist: no agent could connect")
    allow: set[bytes] = set()
    name_keys: dict[str, str] = {}
    for path in map(Path, paths):
        key = load_public_key(path)
        allow.add(key)
        if path.name.endswith(PUBLIC_SUFFIX):
            # NAME.key: only this key may speak as agent NAME (see Auth._speaks_for).
            name_keys[path.name.removesuffix(PUBLIC_SUFFIX)] = key.decode()
    return keys, allow, name_keys


def curve_server(sock: zmq.Socket, keys: tuple[bytes, bytes] | None) -> None:
    if keys is None:
        return
    sock.curve_server = True
    sock.curve_publickey, sock.curve_secretkey = keys


class Auth:
    """Mixed into Controller: the name-to-key binding, checked for every message and telemetry sample."""

    _name_keys: dict[str, str]
    _impostor_logged: dict[tuple[str, str], float]

    def _speaks_for(self, name: str, frame: zmq.Frame) -> bool:
        """False when `name` has its own key file (NAME.key) and the message came with another key.

        `frame` is any frame of the message: all carry its metadata."""
        expected = self._name_keys.get(name)
        if expected is None:
            return True
        presented = frame.get("User-Id")  # the z85 client key, set by the ZAP handler
        if presented == expected:
            return True
        now = time.monotonic()
        if now - self._impostor_logged.get((name, presented), -1e9) >= REJECT_LOG_EVERY_S:
            self._impostor_logged[(name, presented)] = now
            log.warning("dropped a message from a key %s speaking as agent %s (whose key is %s)",
                        fingerprint(str(presented).encode()), name, fingerprint(expected.encode()),
                        extra={"event": "agent_impersonation", "agent": name,
                               "fingerprint": fingerprint(str(presented).encode())})
        return False
