"""A folder a command is told to write into (`run --out`, `rerun --out`, `agent install --root`, `tls DIR`), checked
before anything is made: empty text, a NUL byte, or a path that is (or passes through) a file rather than a
folder is an error naming the option, not a traceback after the work (issue 42)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cellab.errors import InputError

ALLOWED = ["an existing folder", "a new name in an existing folder"]


def check_out_dir(path: str | Path, source: str, option: str) -> Path:
    """`path` as a Path when it names a folder or a place for a new one; InputError naming `option` otherwise."""
    text = os.fspath(path)
    if not text.strip():
        raise InputError(source, option, "an empty folder name (the current folder is `.`)", ALLOWED)
    if "\0" in text:
        raise InputError(source, option, "a NUL byte in a folder name", ALLOWED)
    out = Path(text)
    for place in (out, *out.parents):
        try:
            mode = os.stat(place).st_mode  # a link to a folder is a folder here; writers refuse links themselves
        except (FileNotFoundError, NotADirectoryError):  # not there, or below a file: its parent says which
            continue
        except OSError as exc:  # a name too long, a loop of links, a folder we may not search
            raise InputError(source, option, f"{text}: {exc.strerror or exc}", ALLOWED) from None
        if not stat.S_ISDIR(mode):
            what = "it is" if place == out else f"{place} is"
            kind = "file" if stat.S_ISREG(mode) else "special file (a FIFO, socket or device)"
            raise InputError(source, option, f"{text}: {what} a {kind}, not a folder", ALLOWED)
        break
    return out
