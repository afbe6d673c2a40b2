"""Agent names and ZeroMQ endpoints, checked before they reach a socket, a log or a subscriber."""

from __future__ import annotations

import re

from cellab.errors import InputError
from cellab.inputs import name_problem

# tcp: a host (or interface, or `*` to bind) and a port 1..65535 (or `*`); ipc and inproc: a non-blank name
_ENDPOINT_RE = re.compile(r"^(tcp://[^\s/:]+|tcp://\[[0-9A-Fa-f:.]+\]):(\*|[1-9]\d{0,4})$|^(ipc|inproc)://\S.*$")


def is_name(value: object) -> bool:
    """Whether `value` is a valid agent name (for names that arrive on the wire)."""
    return type(value) is str and name_problem(value) is None


def check_name(name: str, source: str = "agent") -> str:
    """cellab.inputs' one name rule (re's `$` let a trailing newline through; a bad character is named)."""
    problem = name_problem(name)
    if problem:
        raise InputError(source, "name", f"{short(name)} is not a valid agent name: it {problem}",
                         ["1-64 of ASCII letters, digits, '_', '.', '-', starting with a letter or digit"])
    return name


def check_endpoint(endpoint: str, source: str, field: str) -> str:
    match = _ENDPOINT_RE.fullmatch(endpoint) if isinstance(endpoint, str) else None
    port = match.group(2) if match else None
    if match is None or (port not in (None, "*") and int(port) > 65535) or "\n" in endpoint:
        raise InputError(source, field, f"{endpoint!r} is not a ZeroMQ endpoint",
                         ["tcp://HOST:PORT", "ipc://PATH", "inproc://NAME"])
    return endpoint


def short(value: object, limit: int = 60) -> str:
    """repr(value), cut to `limit` characters: what a log line or an error reply says of a wire value."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
