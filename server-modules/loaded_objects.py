"""The server modules' BPF programs as the kernel holds them: read back through the bpf(2) syscall, not from a
build tree, so a run's provenance names what was loaded on the server.

A module's loader pins its maps and link under /sys/fs/bpf/cellab/<name>/. Every program and map of one loaded
ELF object shares that object's BTF id: the programs whose btf_id is the pinned maps' are the module's (a tc
module's link names its program too). Each program is named by the kernel's tag (a hash of its instructions,
map references zeroed: stable across loads of the same object, changed by any change to its code; the
instructions as the verifier left them are not used: they carry each load's own map ids). The module's
`sha256` digests its programs' names and tags.
Needs CAP_SYS_ADMIN (root), like loading.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
from pathlib import Path
from typing import Any

BPFFS_MODULES = Path("/sys/fs/bpf/cellab")
#: the bpf(2) syscall's number per machine
SYS_BPF = {"x86_64": 321, "aarch64": 280, "armv7l": 386, "riscv64": 280}
BPF_OBJ_GET, BPF_PROG_GET_NEXT_ID, BPF_PROG_GET_FD_BY_ID, BPF_OBJ_GET_INFO_BY_FD = 7, 11, 13, 15
PROG_INFO_BYTES = 256   # struct bpf_prog_info: its fields up to btf_id (offset 128) are what we read
MAP_INFO_BYTES = 128    # struct bpf_map_info: up to btf_id (offset 64)
LINK_INFO_BYTES = 64    # struct bpf_link_info: type, id, prog_id


class BpfReadError(OSError):
    """The kernel refused a bpf(2) read-back (not root, no bpffs pin, a kernel without the command)."""


_libc = ctypes.CDLL(None, use_errno=True)


def _bpf(cmd: int, attr: ctypes.Array) -> int:
    number = SYS_BPF.get(platform.machine())
    if number is None:
        raise BpfReadError(0, f"no bpf(2) syscall number known for {platform.machine()}")
    result = _libc.syscall(ctypes.c_long(number), ctypes.c_int(cmd), attr, ctypes.c_uint(len(attr)))
    if result < 0:
        err = ctypes.get_errno()
        raise BpfReadError(err, os.strerror(err))
    return result


def _u32(buf: bytes | ctypes.Array, at: int) -> int:
    return int.from_bytes(bytes(buf[at:at + 4]), "little")


def _attr(size: int = 128) -> ctypes.Array:
    return ctypes.create_string_buffer(size)


def _pinned_fd(path: Path) -> int:
    attr, name = _attr(), ctypes.create_string_buffer(os.fsencode(path))
    attr[0:8] = ctypes.addressof(name).to_bytes(8, "little")
    return _bpf(BPF_OBJ_GET, attr)


def _info(fd: int, size: int) -> bytes:
    """BPF_OBJ_GET_INFO_BY_FD: the object's info struct, `size` bytes of it."""
    info = ctypes.create_string_buffer(size)
    attr = _attr()
    attr[0:4] = fd.to_bytes(4, "little")
    attr[4:8] = size.to_bytes(4, "little")
    attr[8:16] = ctypes.addressof(info).to_bytes(8, "little")
    _bpf(BPF_OBJ_GET_INFO_BY_FD, attr)
    return info.raw


def _prog_ids() -> list[int]:
    ids, current = [], 0
    while True:
        attr = _attr()
        attr[0:4] = current.to_bytes(4, "little")
        try:
            _bpf(BPF_PROG_GET_NEXT_ID, attr)
        except BpfReadError as exc:
            if exc.errno == 2:  # ENOENT: the last one
                return ids
            raise
        current = _u32(attr, 4)
        ids.append(current)


def _prog_fd(prog_id: int) -> int | None:
    attr = _attr()
    attr[0:4] = prog_id.to_bytes(4, "little")
    try:
        return _bpf(BPF_PROG_GET_FD_BY_ID, attr)
    except BpfReadError:
        return None  # unloaded since it was listed


def program(fd: int) -> dict[str, Any]:
    """One loaded program: {id, name (the kernel keeps 15 characters), tag, btf_id}."""
    info = _info(fd, PROG_INFO_BYTES)
    name = info[64:80].split(b"\0")[0].decode(errors="replace")
    return {"id": _u32(info, 4), "name": name, "tag": info[8:16].hex(), "btf_id": _u32(info, 128)}


def _pins(name: str, root: Path) -> list[Path]:
    folder = root / name
    return sorted(p for p in folder.iterdir() if p.name != "link") if folder.is_dir() else []


def module_programs(name: str, root: Path = BPFFS_MODULES) -> dict[str, Any] | None:
    """A loaded module's programs as the kernel holds them: {programs: {program name: tag}, sha256}; None when
    the module is not pinned (not loaded)."""
    link = root / name / "link"
    if not link.exists():
        return None
    btf_ids, link_prog = set(), 0
    for pin in _pins(name, root):
        fd = _pinned_fd(pin)
        try:
            btf_ids.add(_u32(_info(fd, MAP_INFO_BYTES), 64))
        finally:
            os.close(fd)
    fd = _pinned_fd(link)
    try:
        link_prog = _u32(_info(fd, LINK_INFO_BYTES), 8)  # a tc link's program; 0 for a struct_ops link
    finally:
        os.close(fd)
    btf_ids.discard(0)
    found: dict[str, dict[str, Any]] = {}
    for prog_id in _prog_ids():
        fd = _prog_fd(prog_id)
        if fd is None:
            continue
        try:
            prog = program(fd)
        finally:
            os.close(fd)
        if prog["id"] == link_prog or prog["btf_id"] in btf_ids:
            found[prog["name"]] = prog["tag"]
    digest = hashlib.sha256("".join(f"{n} {tag}\n" for n, tag in sorted(found.items())).encode()).hexdigest()
    return {"programs": dict(sorted(found.items())), "sha256": digest if found else None}


def loaded_modules(names: list[str] | None = None, root: Path = BPFFS_MODULES) -> dict[str, Any]:
    """Every pinned module (or those of `names`), by module_programs; a module the kernel will not describe
    gives {"error": why} instead, so a provenance report never fails a run."""
    if names is None:
        names = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name != "shared") if root.is_dir() else []
    out: dict[str, Any] = {}
    for name in names:
        try:
            described = module_programs(name, root)
        except OSError as exc:
            out[name] = {"error": f"cannot read it back from the kernel: {exc}"}
            continue
        if described is not None:
            out[name] = described
    return out
