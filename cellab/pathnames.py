"""File names a person writes into a campaign or an inventory, checked before any system call sees them: a NUL
byte (the kernel would cut the name there; Python refuses it with a ValueError), a component longer than
NAME_MAX or a name longer than PATH_MAX (the kernel's ENAMETOOLONG, a bare OSError in pathlib) end as one
InputError naming the file and the field instead of a traceback."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from cellab.errors import InputError

NAME_MAX_BYTES = 255  # one component (Linux NAME_MAX)
PATH_MAX_BYTES = 4095  # the whole name, its terminating NUL left out (Linux PATH_MAX 4096)
NUL_BYTE = b"\0"
PATH_FORM = (f"a file name without NUL bytes, each part at most {NAME_MAX_BYTES} bytes, the whole at most "
             f"{PATH_MAX_BYTES} bytes")


def path_problem(value: object) -> str | None:
    """Why `value` cannot name a file on this system, or None (whether it exists is the reader's concern)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str | bytes):
        return None  # not text: the schema says what the field takes
    try:
        raw = value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:  # a lone UTF-16 surrogate, as YAML's "\ud800" makes
        return f"has {exc.object[exc.start]!r} at character {exc.start}, which no file name can hold"
    if b"\0" in raw:
        return f"has a NUL byte at byte {raw.index(NUL_BYTE)}"
    if len(raw) > PATH_MAX_BYTES:
        return f"is {len(raw)} bytes long"
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > NAME_MAX_BYTES:
        return f"has a part of {len(longest)} bytes ({longest[:24].decode('utf-8', 'replace')}...)"
    return None


def check_path(value: object, source: object, field: str) -> None:
    problem = path_problem(value)
    if problem:
        raise InputError(shown(source), field, f"the file name {problem}", [PATH_FORM])


def shown(source: object, limit: int = 200) -> str:
    """A file name as a message shows it: a NUL as \\0, a long one cut."""
    text = os.fspath(source) if isinstance(source, os.PathLike) else str(source)
    text = text.replace("\0", "\\0")
    return text if len(text) <= limit else text[:limit] + "..."


def check_text_tree(data: Any, source: object, path_keys: Iterable[str], field: str = "") -> None:
    """Every string of parsed YAML: no NUL byte anywhere (no field of cellab's takes one), and the values of
    `path_keys` (at any depth) names of files (path_problem). The first problem raises, naming its field."""
    keys = frozenset(path_keys)
    stack: list[tuple[str, Any, bool]] = [(field, data, False)]
    while stack:
        where, value, is_path = stack.pop()
        if isinstance(value, str):
            if is_path:
                check_path(value, source, where)
            elif "\0" in value:
                raise InputError(shown(source), where, "has a NUL byte", ["text without NUL bytes"])
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and "\0" in key:
                    raise InputError(shown(source), where, "a key has a NUL byte", ["text without NUL bytes"])
                stack.append((f"{where}.{key}" if where else str(key), item, is_path or key in keys))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", item, is_path) for i, item in enumerate(value))
