"""A cluster's address as `cellab run --cluster` and `cellab worker --scheduler` take it, and a bounded probe of it.

`tls://HOST:PORT` (with `--tls DIR`, the folder `cellab tls` made) is the cluster's transport; `tcp://HOST:PORT`
is unencrypted and unauthenticated (anyone who reaches the port can submit tasks or pose as a worker), so it is
refused unless the user says `--insecure`, as the agents' bus refuses an unauthenticated peer. The probe
connects and waits for the scheduler's first bytes (Dask's handshake, after TLS's) within a bound: a port that
accepts a connection and never answers ends in an error naming that bound, not a campaign that hangs.
"""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

from cellab.errors import CellabError, InputError

SCHEMES = ("tls://", "tcp://")
FORMS = ["tls://HOST:PORT (with --tls DIR)", "tcp://HOST:PORT (with --insecure)"]


def parse_address(address: object, command: str, option: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a scheduler address; an InputError naming the option otherwise."""
    def bad(why: str) -> InputError:
        return InputError(command, option, f"{str(address)[:80]!r} {why}", FORMS)

    if not isinstance(address, str) or not address.isprintable() or any(c.isspace() for c in address):
        raise bad("is not a scheduler address")
    scheme, sep, rest = address.partition("://")
    if not sep:
        raise bad("has no scheme")
    if f"{scheme}://" not in SCHEMES:
        raise bad(f"has the scheme {scheme}://, not tls:// or tcp://")
    host, _, port = rest.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or "/" in host or "@" in host or not port.isascii() or not port.isdigit() \
            or not 1 <= int(port) <= 65535:
        raise bad("is not HOST:PORT with a port 1..65535")
    return scheme, host, int(port)


def check_security(address: str, tls_dir: Path | None, insecure: bool, command: str, option: str) -> str:
    """The address's scheme, once its security options agree with it: tls:// needs --tls; tcp:// needs
    --insecure and no --tls (certificates would not be used)."""
    scheme, _, _ = parse_address(address, command, option)
    if scheme == "tls":
        if tls_dir is None:
            raise InputError(command, "--tls", f"{address} needs certificates", ["--tls DIR (cellab tls DIR)"])
        if insecure:
            raise InputError(command, "--insecure", f"goes with tcp:// addresses, and {address} is TLS",
                             ["tls://HOST:PORT --tls DIR", "tcp://HOST:PORT --insecure"])
        return scheme
    if tls_dir is not None:
        raise InputError(command, "--tls", f"{address} is tcp://, which would not use the certificates in "
                         f"{tls_dir}", [f"tls://{address.split('://', 1)[1]} --tls {tls_dir}"])
    if not insecure:
        raise InputError(command, option, f"{address} is tcp://: no encryption, no authentication (whoever reaches "
                         "the port can run tasks or pose as a worker); refused",
                         ["tls://HOST:PORT --tls DIR (cellab tls DIR)", "--insecure to accept tcp:// anyway"])
    return scheme


def probe(address: str, tls_dir: Path | None, timeout_s: float) -> None:
    """Connect (and, for tls://, shake hands) and read the scheduler's first bytes, each within timeout_s: a
    CellabError naming the address and the bound otherwise."""
    scheme, host, port = parse_address(address, "cellab run", "--cluster")
    where = f"Dask scheduler {address}"
    step = "connect"
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw:
            raw.settimeout(timeout_s)
            sock: socket.socket = raw
            if scheme == "tls":
                assert tls_dir is not None
                step = "TLS handshake"
                context = ssl.create_default_context(cafile=str(Path(tls_dir) / "ca.pem"))
                context.check_hostname = False  # as Dask: the CA is the cluster's own, the peer is any node
                context.load_cert_chain(str(Path(tls_dir) / "node.pem"), str(Path(tls_dir) / "node.key"))
                sock = context.wrap_socket(raw)
            step = "handshake"
            if not sock.recv(1):
                raise CellabError(f"{where}: it closed the connection before its handshake (is it a Dask "
                                  "scheduler, and does it use this scheme?)")
    except TimeoutError:
        raise CellabError(f"{where}: no answer to the {step} within {timeout_s:g} s (the connect and handshake "
                          "timeout, CELLAB_CONNECT_TIMEOUT_S); is it a Dask scheduler?") from None
    except ssl.SSLError as exc:
        raise CellabError(f"{where}: TLS handshake refused ({exc.reason or exc}); are its certificates from the "
                          f"same `cellab tls` folder as {tls_dir}?") from None
    except OSError as exc:
        raise CellabError(f"{where}: {step} failed ({type(exc).__name__}: {exc.strerror or exc})") from None
