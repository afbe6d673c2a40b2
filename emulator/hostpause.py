"""A UE's host paused (fault `ue_pause` on the virtual lab): its processes frozen with the cgroup v2 freezer.

The host of UE i is what would stop with a paused UE: everything its UE agent started (the agent found by its
argv, which names the lab instance's own UE: `--netns <prefix>-ue<i>`, or a virtual phone's `--serial`) and
every process inside the UE's namespace (iperf3, cellab-probe, started by `ip netns exec`). The agent itself
runs on (issue 41): like a phone's agent on the laptop beside it, it keeps its heartbeats and says its UE is
out, so the bus tells a UE out for minutes from an agent gone. They move into a
cgroup of their own, `cellab-<prefix>-ue<i>` under the cgroup v2 mount, whose `cgroup.freeze` stops them all
at once (children a process forks later are born in it); thawing writes 0, moves each process back to the
cgroup it came from (kept in a file beside the lab's state, so a crashed controller's leftovers can be thawed
by the next `up` or `down`) and removes the cgroup. The freezer, unlike SIGSTOP, cannot be undone by a stray
SIGCONT and reaches processes in other sessions (every child of the agent has its own).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable
from pathlib import Path

from cellab.errors import CellabError
from cellab.records import write_atomic

FROZEN_WAIT_S = 2.0  # a task in uninterruptible sleep freezes when it leaves it: normally milliseconds


def cgroup2_root() -> Path:
    """Where cgroup v2 is mounted (/sys/fs/cgroup on unified hosts, /sys/fs/cgroup/unified on hybrid ones)."""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    raise CellabError("ue_pause needs the cgroup v2 freezer: no cgroup2 file system is mounted on this host")


def _proc_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:  # the process has exited (or is a kernel thread without the file)
        return None


def _parent(pid: int) -> int | None:
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        return None
    return int(stat[stat.rindex(b")") + 2:].split()[1])  # after "pid (comm) state": ppid


def _net_ns(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def _has_pair(argv: list[bytes], flag: str, value: str) -> bool:
    want = [flag.encode(), value.encode()]
    return any(argv[i:i + 2] == want for i in range(len(argv) - 1))


def host_pids(netns: str, agent_marks: Iterable[tuple[str, str]]) -> set[int]:
    """The processes of one UE's host: the descendants of its UE agents (argv with `agent`, `--role ue` and one of
    `agent_marks`, a flag and its value; the agents themselves not) and every process in namespace `netns`.
    Never this process or its ancestors."""
    marks = list(agent_marks)
    ns_ino = os.stat(f"/run/netns/{netns}").st_ino
    mine = set()
    pid: int | None = os.getpid()
    while pid and pid not in mine:
        mine.add(pid)
        pid = _parent(pid)
    found: set[int] = set()
    agents: set[int] = set()
    children: dict[int, list[int]] = {}
    for pid in _proc_pids():
        parent = _parent(pid)
        if parent is not None:
            children.setdefault(parent, []).append(pid)
        if _net_ns(pid) == ns_ino:
            found.add(pid)
            continue
        argv = (_read(f"/proc/{pid}/cmdline") or b"").split(b"\0")
        if b"agent" in argv and _has_pair(argv, "--role", "ue") and any(_has_pair(argv, f, v) for f, v in marks):
            agents.add(pid)
    todo = list(found | agents)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found - mine - agents


class HostFreezer:
    """Freezes and thaws the hosts of one lab instance's UEs (`prefix`), keeping its records in `state_dir`."""

    def __init__(self, prefix: str, state_dir: Path):
        self.prefix, self.state_dir = prefix, state_dir

    def cgroup_name(self, ue: int) -> str:
        return f"cellab-{self.prefix}-ue{ue}"

    def _record(self, ue: int) -> Path:
        return self.state_dir / f"paused-ue{ue}.json"

    def freeze(self, ue: int, netns: str, agent_marks: Iterable[tuple[str, str]]) -> dict[str, int]:
        """Stop every process of UE `ue`'s host; `{"frozen_pids": n}`. Moving and scanning repeat until a scan
        finds nothing new (a child forked while the scan ran is caught by the next one)."""
        marks = list(agent_marks)
        group = cgroup2_root() / self.cgroup_name(ue)
        group.mkdir(exist_ok=True)
        record = self._record(ue)
        origins: dict[str, str] = json.loads(record.read_text()) if record.exists() else {}
        try:
            (group / "cgroup.freeze").write_text("1")
            for _ in range(10):
                new = [pid for pid in host_pids(netns, marks) if str(pid) not in origins]
                if not new:
                    break
                found = {pid: origin for pid in new if (origin := _cgroup_of(pid)) is not None}  # None: exited
                origins.update({str(pid): origin for pid, origin in found.items()})
                write_atomic(record, json.dumps(origins))  # before the moves: a crash leaves a thawable trace
                for pid in found:
                    try:
                        (group / "cgroup.procs").write_text(str(pid))
                    except ProcessLookupError:
                        pass
            else:
                raise CellabError(f"UE {ue}: its host kept starting processes while being paused")
            _wait_frozen(group, True)
        except BaseException:
            self.thaw(ue)
            raise
        return {"frozen_pids": len(_procs(group))}

    def thaw(self, ue: int) -> dict[str, int]:
        """Continue UE `ue`'s host (a no-op when it is not paused): `{"thawed_pids": n}`."""
        root = cgroup2_root()
        group = root / self.cgroup_name(ue)
        record = self._record(ue)
        origins: dict[str, str] = json.loads(record.read_text()) if record.exists() else {}
        thawed = 0
        if group.is_dir():
            (group / "cgroup.freeze").write_text("0")
            for _ in range(10):  # a thawed process may fork before it is moved back: until the cgroup is empty
                pids = _procs(group)
                if not pids:
                    break
                for pid in pids:
                    thawed += 1
                    _move(root, pid, origins.get(str(pid), "/"))
            _remove_cgroup(group)
        record.unlink(missing_ok=True)
        return {"thawed_pids": thawed}

    def paused(self) -> list[int]:
        """The UEs whose host is paused now (their cgroup exists), from the cgroup file system."""
        try:
            root = cgroup2_root()
        except CellabError:
            return []
        pattern = re.compile(re.escape(f"cellab-{self.prefix}-ue") + r"(\d+)")
        return sorted(int(m.group(1)) for p in root.iterdir() if (m := pattern.fullmatch(p.name)) and p.is_dir())

    def thaw_all(self) -> None:
        """Every UE of this instance thawed (the lab's down, a crashed controller's leftovers)."""
        errors = []
        for ue in self.paused():
            try:
                self.thaw(ue)
            except (OSError, CellabError) as exc:  # the others still thawed
                errors.append(f"UE {ue}: {exc}")
        for record in self.state_dir.glob("paused-ue*.json"):
            record.unlink(missing_ok=True)
        if errors:
            raise CellabError("could not thaw the paused UE hosts: " + "; ".join(errors))


def _cgroup_of(pid: int) -> str | None:
    text = _read(f"/proc/{pid}/cgroup")
    if text is None:
        return None
    for line in text.decode(errors="replace").splitlines():
        if line.startswith("0::"):
            return line[3:] or "/"
    return "/"


def _procs(group: Path) -> list[int]:
    try:
        return [int(x) for x in (group / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def _move(root: Path, pid: int, origin: str) -> None:
    """Back to the cgroup the process came from, or the root when that one is gone."""
    for target in (root / origin.lstrip("/"), root):
        try:
            (target / "cgroup.procs").write_text(str(pid))
            return
        except ProcessLookupError:
            return
        except OSError:
            continue


def _wait_frozen(group: Path, frozen: bool) -> None:
    deadline = time.monotonic() + FROZEN_WAIT_S
    want = f"frozen {int(frozen)}"
    while want not in (group / "cgroup.events").read_text().splitlines():
        if time.monotonic() > deadline:
            raise CellabError(f"{group.name}: not {'frozen' if frozen else 'thawed'} within {FROZEN_WAIT_S:g} s")
        time.sleep(0.005)


def _remove_cgroup(group: Path) -> None:
    for _ in range(50):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:  # a process just leaving: the kernel frees the cgroup a moment later
            time.sleep(0.01)
    raise CellabError(f"{group}: could not be removed (processes still in it: {_procs(group)})")
