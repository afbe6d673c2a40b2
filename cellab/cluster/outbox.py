"""A run folder's way from a worker to the controller, in bounded chunks.

A task's result carries the run folder's small files inline (up to INLINE_TOTAL_BYTES, files of up to
INLINE_FILE_BYTES: a manifest, metrics, logs) and leaves the others in the worker's *outbox* (a folder of this
worker process, one box per run), listing them by path and size. The controller then pulls each boxed file
with `client.run` (out of Dask's task slots, so a busy lab slot never delays it), CHUNK_BYTES at a time,
writing each chunk to the run's folder before asking for the next: its memory holds one chunk whatever the
folder's size. A run folder larger than the per-run limit ($CELLAB_RUN_FOLDER_MAX_MB, default 2048 MiB) fails
that run on the worker, naming its size and the limit; the controller refuses a result declaring more.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

from cellab.errors import CellabError, InputError

CHUNK_BYTES = 4 << 20
INLINE_FILE_BYTES = 256 << 10
INLINE_TOTAL_BYTES = 1 << 20
LIMIT_ENV, LIMIT_MB, MAX_LIMIT_MB = "CELLAB_RUN_FOLDER_MAX_MB", 2048, 1 << 20
BOX_NAME = re.compile(r"[0-9a-f]{32}")

_root: Path | None = None


class FolderTooLarge(CellabError):
    """A run folder above the per-run limit: that run fails."""


def limit_bytes() -> int:
    raw = os.environ.get(LIMIT_ENV, "").strip()
    if not raw:
        return LIMIT_MB << 20
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT_MB:
        raise InputError(f"${LIMIT_ENV}", "", f"{raw[:40]!r} is not a size in MiB", [f"1..{MAX_LIMIT_MB}"])
    return int(raw) << 20


def outbox_root() -> Path:
    """This worker process's outbox (made on first use; close_outbox removes it)."""
    global _root
    if _root is None:
        _root = Path(tempfile.mkdtemp(prefix=f"cellab-outbox-{os.getpid()}-"))
    return _root


def close_outbox() -> None:
    global _root
    if _root is not None:
        shutil.rmtree(_root, ignore_errors=True)
        _root = None


def ship(folder: Path, worker_address: str) -> tuple[dict[str, bytes], dict[str, Any] | None]:
    """(the files sent inline, the outbox entry for the others or None); the others are moved into a new box.
    FolderTooLarge when the folder's regular files (links are not followed) pass the per-run limit."""
    limit = limit_bytes()
    entries = [(str(p.relative_to(folder)), p, p.stat().st_size) for p in sorted(folder.rglob("*"))
               if not p.is_symlink() and p.is_file()]
    total = sum(size for _, _, size in entries)
    if total > limit:
        raise FolderTooLarge(f"the run folder is {total / 2**20:.1f} MiB, more than the limit of {limit >> 20} MiB "
                             f"per run (${LIMIT_ENV}); it was not sent")
    inline: dict[str, bytes] = {}
    boxed = []
    for rel, path, size in entries:
        if size <= INLINE_FILE_BYTES and sum(map(len, inline.values())) + size <= INLINE_TOTAL_BYTES:
            inline[rel] = path.read_bytes()
        else:
            boxed.append((rel, path, size))
    if not boxed:
        return inline, None
    box = secrets.token_hex(16)
    for rel, path, _ in boxed:
        target = outbox_root() / box / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(path, target)
    return inline, {"worker": worker_address, "box": box, "files": [[rel, size] for rel, _, size in boxed]}


def _boxed_path(box: str, parts: list[str]) -> Path:
    if not isinstance(box, str) or not BOX_NAME.fullmatch(box) or any(p in ("", ".", "..") for p in parts):
        raise CellabError(f"no such outbox file: {box!r} {parts!r}")
    return outbox_root().joinpath(box, *parts)


def read_chunk(box: str, parts: list[str], offset: int) -> bytes:
    """Up to CHUNK_BYTES of a boxed file from `offset` (run on the worker by the controller's client.run)."""
    fd = os.open(_boxed_path(box, parts), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        return os.pread(fd, CHUNK_BYTES, int(offset))
    finally:
        os.close(fd)


def drop_box(box: str) -> None:
    """A box the controller has fetched (or given up on) goes."""
    shutil.rmtree(_boxed_path(box, []), ignore_errors=True)


def fetch(client: Any, outbox: dict[str, Any], folder: Path) -> int:
    """Every boxed file of a checked outbox (cellab.cluster.result.check_outbox) into the run's fresh `folder`,
    chunk by chunk, each written beside its name and renamed into place; the bytes fetched. A file that ends
    early or runs long, or a worker that left, is a CellabError naming it. The box is dropped either way."""
    worker, box = outbox["worker"], outbox["box"]

    def on_worker(function: Any, *args: Any) -> Any:
        try:
            answers = client.run(function, *args, workers=[worker])
        except Exception as exc:  # noqa: BLE001 - whatever Dask raises for a worker gone or a failed call
            raise CellabError(f"worker {worker}: {type(exc).__name__}: {exc}") from None
        if worker not in answers:
            raise CellabError(f"worker {worker} left before its run folder was fetched")
        return answers[worker]

    fetched = 0
    try:
        for rel, size in outbox["files"]:
            parts = rel.split("/")
            target = folder.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            part = target.with_name(f".{parts[-1][:200]}.{secrets.token_hex(4)}.part")
            with os.fdopen(os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644), "wb") as out:
                got = 0
                while got < size:
                    chunk = on_worker(read_chunk, box, parts, got)
                    if not isinstance(chunk, bytes) or not chunk or got + len(chunk) > size:
                        raise CellabError(f"{rel}: the worker's file does not hold the {size} bytes it declared "
                                          f"(at {got})")
                    out.write(chunk)
                    got += len(chunk)
            os.replace(part, target)
            fetched += size
    finally:
        try:
            on_worker(drop_box, box)
        except CellabError:
            pass  # a worker that left took its outbox with it
    return fetched
