"""Network-namespace plumbing for the embedded labs (pyroute2), and argv to run a program inside one."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from cellab.errors import CellabError

NETNS_DIR = Path("/run/netns")
_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,14}$")


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise CellabError(f"{what} needs root (network namespaces): run it with sudo")


def _pyroute2():
    """pyroute2, imported when a namespace is first touched: importing it takes 0.7 s of CPU, which a `cellab
    validate` or `plan` (they load lab classes for their parameters) must not pay."""
    import pyroute2

    return pyroute2


def NetNS(name: str):  # noqa: N802  (pyroute2's class, reached lazily)
    return _pyroute2().NetNS(name)


class _LazyNetns:
    """pyroute2.netns, loaded on first use (rooms that call it directly import this, not pyroute2)."""

    def __getattr__(self, name: str):
        return getattr(_pyroute2().netns, name)


pr_netns = _LazyNetns()


def names() -> list[str]:
    """Every named network namespace on the host."""
    return list(_pyroute2().netns.listnetns())


def exists(name: str) -> bool:
    return (NETNS_DIR / name).exists()


def create(name: str) -> None:
    if not _NAME_RE.fullmatch(name):
        raise CellabError(f"namespace name {name!r} is not valid")
    if exists(name):
        remove(name)
    _pyroute2().netns.create(name)
    with NetNS(name) as ns:
        ns.link("set", index=ns.link_lookup(ifname="lo")[0], state="up")


def kill_processes(name: str) -> None:
    """Processes left inside a namespace (a crashed run's iperf3, say) would keep it alive."""
    result = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, check=False)
    for pid in result.stdout.split():
        try:
            os.kill(int(pid), 9)
        except (ProcessLookupError, ValueError):
            pass


def remove(name: str) -> None:
    if not exists(name):
        return
    kill_processes(name)
    _pyroute2().netns.remove(name)


def veth(ns_a: str, if_a: str, ns_b: str, if_b: str) -> None:
    """A veth pair created inside ns_a with its peer placed in ns_b (never in the root namespace)."""
    with NetNS(ns_a) as ns:
        ns.link("add", ifname=if_a, kind="veth", peer={"ifname": if_b, "net_ns_fd": ns_b})


def address(ns_name: str, ifname: str, cidr: str) -> None:
    addr, prefixlen = cidr.split("/")
    with NetNS(ns_name) as ns:
        index = ns.link_lookup(ifname=ifname)[0]
        ns.addr("add", index=index, address=addr, prefixlen=int(prefixlen))
        ns.link("set", index=index, state="up")


def default_route(ns_name: str, gateway: str) -> None:
    with NetNS(ns_name) as ns:
        ns.route("add", dst="0.0.0.0/0", gateway=gateway)


def tbf(ns_name: str, ifname: str, rate_bps: int, buffer_bytes: int, burst_bytes: int) -> None:
    """Replace the root qdisc of ifname with a token bucket: rate, burst, and a drop-tail queue of buffer_bytes."""
    with NetNS(ns_name) as ns:
        index = ns.link_lookup(ifname=ifname)[0]
        ns.tc("replace", "tbf", index=index, handle="1:", rate=f"{rate_bps}bit", burst=burst_bytes, limit=buffer_bytes)


def sysctl(ns_name: str, key: str, value: str) -> None:
    subprocess.run(in_netns(ns_name, ["sysctl", "-q", "-w", f"{key}={value}"]), check=True)


def in_netns(ns_name: str, argv: list[str]) -> list[str]:
    """argv that runs a program inside a namespace (no shell involved)."""
    return ["ip", "netns", "exec", ns_name, *argv]
