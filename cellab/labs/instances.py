"""Embedded-lab instances on one host: each is named by a prefix and held by a lease.

An instance's namespaces, links, state folder and ZeroMQ/adb endpoints all derive from its prefix, so two
instances with two prefixes never share anything. The lease is an exclusive flock on
`/run/cellab/instances/<prefix>.lock`: the process that brought the instance up holds it (a campaign's
session, or the virtual cell started by `cellab vlab up`, which inherits it), and the kernel frees it when that
process dies — so a held lock means a live instance, and namespaces whose lock nobody holds are a crashed
instance's leftovers. Bringing a lab up takes the lease first and fails naming the holder when another live
instance has that prefix; it never tears down someone else's lab.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from cellab.errors import CellabError, InputError

INSTANCE_ROOT = Path("/run/cellab/instances")
BENCH_ROOT = Path("/run/cellab/benches")  # inventory labs: one lease per bench, on its controller host
#: namespace names are at most 15 bytes: the prefix, a dash and the longest suffix a lab uses (`ue15`, `core`)
PREFIX_RE = re.compile(r"[a-z][a-z0-9]{0,7}")
PREFIX_RULE = "1-8 characters: a lower-case letter, then lower-case letters or digits"
#: the prefix each kind tries first when none is given (then <base>2, <base>3, ...)
DEFAULT_BASES = {"wired": "clw", "virtual": "clv", "virtual-android": "cla", "srsran-zmq": "czq"}
MAX_AUTO_INSTANCES = 99
#: namespace suffixes the embedded labs create (a leftover is recognised by them)
_SUFFIX_RE = re.compile(r"(srv|rtr|core|ue\d{1,2})")


class InstanceBusy(CellabError):
    """The prefix belongs to another live lab instance."""


def check_prefix(prefix: object, source: str = "lab instance", field_name: str = "prefix") -> str:
    """The one rule for a lab prefix (every embedded lab kind uses it)."""
    if not isinstance(prefix, str) or not PREFIX_RE.fullmatch(prefix):
        raise InputError(source, field_name, f"{prefix!r} is not a lab prefix", [PREFIX_RULE])
    return prefix


@dataclass
class Holder:
    """Who took an instance's lease (written beside the lock when it was taken)."""

    pid: int
    kind: str
    purpose: str
    since: float

    def describe(self) -> str:
        who = f"pid {self.pid} ({_cmdline(self.pid)})" if alive(self.pid) else f"pid {self.pid}, exited; kept by its cell"
        return f"{self.kind} lab for {self.purpose}, {who}, since {time.strftime('%H:%M:%S', time.localtime(self.since))}"


@dataclass
class InstanceLease:
    """A held lease; `fd` can be passed to a child that must keep the instance alive after this process."""

    prefix: str
    kind: str
    handle: IO[str] = field(repr=False)

    @property
    def fd(self) -> int:
        return self.handle.fileno()

    @property
    def held(self) -> bool:
        return not self.handle.closed

    def release(self) -> None:
        if not self.handle.closed:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()


@dataclass
class InstanceInfo:
    prefix: str
    live: bool
    holder: Holder | None
    namespaces: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "live": self.live, "namespaces": self.namespaces,
                "holder": None if self.holder is None else {**self.holder.__dict__, "alive": alive(self.holder.pid)}}


def _lock_path(prefix: str, root: Path | None = None) -> Path:
    return (root or INSTANCE_ROOT) / f"{prefix}.lock"


def _holder_path(prefix: str, root: Path | None = None) -> Path:
    return (root or INSTANCE_ROOT) / f"{prefix}.json"


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()[:120]
    except OSError:
        return "?"


def open_lock(path: Path) -> IO[str]:
    """A lock file opened for flock: created 0600, never through a link (OSError ELOOP on one), not inherited."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    return os.fdopen(fd, "r+")


def _open_lock(prefix: str, root: Path | None = None) -> IO[str]:
    (root or INSTANCE_ROOT).mkdir(parents=True, exist_ok=True)
    return open_lock(_lock_path(prefix, root))


def holder(prefix: str, root: Path | None = None) -> Holder | None:
    try:
        data = json.loads(_holder_path(prefix, root).read_text())
        return Holder(int(data["pid"]), str(data["kind"]), str(data["purpose"]), float(data["since"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def is_live(prefix: str) -> bool:
    """Someone holds the prefix's lease (this process through another lease counts too)."""
    if not _lock_path(prefix).exists():
        return False
    handle = _open_lock(prefix)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        handle.close()  # closing drops a lock we took only to look
    return False


def claim(prefix: str, kind: str, purpose: str = "") -> InstanceLease:
    """Take the prefix's lease, or fail naming the live instance that holds it."""
    check_prefix(prefix)
    return _claim(prefix, kind, purpose, INSTANCE_ROOT,
                  lambda who: f"lab prefix {prefix!r} belongs to a live instance ({who}); choose another prefix, or "
                              "leave it out to get a free one")


def claim_bench(name: str, purpose: str = "") -> InstanceLease:
    """The lease of an inventory lab (a bench): one campaign or cluster worker drives it at a time."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", name):
        raise InputError("lab inventory", "name", f"{name!r} cannot name a bench lease", ["letters, digits, _ . -"])
    return _claim(name, "inventory", purpose, BENCH_ROOT,
                  lambda who: f"bench {name!r} is held by {who}; wait for it, or stop that campaign")


def _claim(name: str, kind: str, purpose: str, root: Path, busy: Any) -> InstanceLease:
    handle = _open_lock(name, root)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        who = holder(name, root)
        raise InstanceBusy(busy(who.describe() if who else "a holder that left no record")) from None
    data = {"pid": os.getpid(), "kind": kind, "purpose": purpose or _cmdline(os.getpid()), "since": time.time()}
    tmp = _holder_path(name, root).with_suffix(f".{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, _holder_path(name, root))
    return InstanceLease(name, kind, handle)


def allocate(kind: str, purpose: str = "") -> InstanceLease:
    """A free prefix for a new instance of `kind`: its base name, else base2, base3, ..."""
    base = DEFAULT_BASES.get(kind, "cl")
    for n in range(1, MAX_AUTO_INSTANCES + 1):
        prefix = base if n == 1 else f"{base}{n}"
        try:
            return claim(prefix, kind, purpose)
        except InstanceBusy:
            continue
    raise CellabError(f"no free {kind} lab prefix on this host: {base} .. {base}{MAX_AUTO_INSTANCES} are all live "
                      "(`cellab vlab status` lists them)")


def forget(prefix: str) -> None:
    """Remove the lease files of an instance nobody holds (after its leftovers were cleaned)."""
    if not is_live(prefix):
        _holder_path(prefix).unlink(missing_ok=True)
        _lock_path(prefix).unlink(missing_ok=True)


def _namespaces() -> list[str]:
    from cellab.labs import netns

    return netns.names()


def namespaces_of(prefix: str, names: list[str] | None = None) -> list[str]:
    names = _namespaces() if names is None else names
    return sorted(n for n in names if n.startswith(prefix + "-") and _SUFFIX_RE.fullmatch(n[len(prefix) + 1:]))


def list_instances() -> list[InstanceInfo]:
    """Every instance this host knows of: leases (live or left behind) and namespaces laid out as a lab's."""
    names = _namespaces()
    prefixes = {p.stem for p in INSTANCE_ROOT.glob("*.lock")} if INSTANCE_ROOT.is_dir() else set()
    prefixes |= {n.split("-", 1)[0] for n in names if n.endswith("-srv")}
    prefixes = {p for p in prefixes if PREFIX_RE.fullmatch(p)}
    return [InstanceInfo(p, is_live(p), holder(p), namespaces_of(p, names)) for p in sorted(prefixes)]


def _guess_kind(names: list[str]) -> str:
    suffixes = {n.split("-", 1)[1] for n in names}
    return "wired" if "rtr" in suffixes else "srsran-zmq" if "core" in suffixes else "virtual"


def clean(prefix: str) -> str:
    """Remove a crashed instance's leftovers (its processes, namespaces, state, lease files); returns its kind.
    A live instance is refused, naming its holder."""
    from cellab.labs import EMBEDDED_LABS, embedded_lab_class

    check_prefix(prefix)
    if is_live(prefix):
        who = holder(prefix)
        raise InstanceBusy(f"lab prefix {prefix!r} is live ({who.describe() if who else 'holder unknown'}): not "
                           "removed")
    who = holder(prefix)
    kind = who.kind if who and who.kind in EMBEDDED_LABS else _guess_kind(namespaces_of(prefix))
    embedded_lab_class(kind)(prefix=prefix).down()
    from cellab.labs import netns

    for name in namespaces_of(prefix):  # whatever the kind's own down did not know of
        netns.remove(name)
    forget(prefix)
    return kind
