"""Host-scoped module parameters: runs that disagree on one never share a host at once.

A server-module parameter is "netns" (each network namespace, so each lab instance, has its own value) or
"host" (one value for the whole host: it cannot be set per namespace). The server-module catalog declares
which (`cellab-modules list`, `param_scopes`; server-modules/README.md "Scopes"); a loader that reports no
scope for a parameter, or no loader on the controller, makes it "host" (the server contract's rule: the safe
side). A run *holds* a host-scoped parameter when it uses its module: the value it names, else the module's
default (the runner sets every parameter of a module it uses). The dispatcher places such a run on one host
whose runs in flight hold the same values (Dask's `workers=` restriction to that host's workers), or holds it
back until one does; each run held back is recorded for the report (cellab.results.cluster_events).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from cellab.contracts.server import CC_MODULES, ModuleInfo
from cellab.records import PlannedRun

DEFAULT = "default"  # a run that uses a module without naming the parameter: the module's default value


def module_listing() -> dict[str, ModuleInfo] | None:
    """The catalog as this host's loader reports it (None without a loader)."""
    from cellab.campaign.checks import local_modules  # the campaign checks' one call of `cellab-modules list`

    return local_modules()


def modules_used(params: dict[str, Any]) -> set[str]:
    used = set(params.get("module_params") or {})
    ues = params.get("ues")
    ccs = [params.get("cc")] + ([u.get("cc") for u in ues if isinstance(u, dict)] if isinstance(ues, list) else [])
    return used | {cc for cc in ccs if cc in CC_MODULES}


def held_values(params: dict[str, Any], listing: dict[str, ModuleInfo] | None) -> dict[str, str]:
    """`module.param` -> the value (as text) of every host-scoped parameter the run holds."""
    named: dict[str, dict[str, Any]] = params.get("module_params") or {}
    out = {}
    for module in sorted(modules_used(params)):
        info = (listing or {}).get(module)
        names = set(named.get(module, {})) | set(info.params if info else ())
        for param in sorted(names):
            if (info.param_scopes.get(param, "host") if info else "host") == "host":
                value = named.get(module, {}).get(param)
                out[f"{module}.{param}"] = DEFAULT if value is None else f"{value:g}"
    return out


class HostGuard:
    """What each host's runs in flight hold, and where (if anywhere) a run may go now."""

    def __init__(self, listing: dict[str, ModuleInfo] | None):
        self.listing = listing
        self.in_flight: dict[str, dict[str, Counter[str]]] = {}  # host -> param -> value -> runs holding it
        self.placed: dict[str, tuple[str, dict[str, str]]] = {}  # run id -> (host, what it holds)
        self.pinned: dict[str, list[str]] = {}  # run id -> the worker addresses it may run on

    def holds(self, run: PlannedRun) -> dict[str, str]:
        return held_values(run.params, self.listing)

    def conflict(self, host: str, holds: dict[str, str]) -> tuple[str, str, str] | None:
        """(param, this run's value, the value in flight) of the first disagreement on `host`, or None."""
        for param, value in holds.items():
            others = [v for v, n in self.in_flight.get(host, {}).get(param, Counter()).items() if n and v != value]
            if others:
                return param, value, others[0]
        return None

    def choose(self, holds: dict[str, str], hosts: Iterable[str]) -> str | None:
        """The host with the fewest runs in flight among those where nothing disagrees."""
        free = [h for h in hosts if self.conflict(h, holds) is None]
        load = {h: sum(sum(c.values()) for c in self.in_flight.get(h, {}).values()) for h in free}
        return min(free, key=lambda h: (load[h], h)) if free else None

    def claim(self, run: PlannedRun, host: str, holds: dict[str, str]) -> None:
        for param, value in holds.items():
            self.in_flight.setdefault(host, {}).setdefault(param, Counter())[value] += 1
        self.placed[run.run_id] = (host, holds)

    def release(self, run: PlannedRun) -> None:
        self.pinned.pop(run.run_id, None)
        host, holds = self.placed.pop(run.run_id, ("", {}))
        for param, value in holds.items():
            self.in_flight[host][param][value] -= 1


def hosts_serving(workers: dict[str, Any], wanted: dict[str, int]) -> dict[str, list[str]]:
    """host -> the addresses of its workers that offer every resource a run asks for."""
    out: dict[str, list[str]] = {}
    for address, info in workers.items():
        offer = dict(info.get("resources") or {})
        if all(offer.get(k, 0) >= v for k, v in wanted.items()):
            out.setdefault(str(info.get("host") or address), []).append(address)
    return out


def place(guard: HostGuard, run: PlannedRun, workers: Callable[[], dict[str, Any]], wanted: dict[str, int],
          note: Callable[[PlannedRun, str, tuple[str, str, str]], None]) -> dict[str, Any] | None:
    """Dask's submit options for a run: {} when it holds no host-scoped parameter; a restriction to one host's
    workers when it does and some host agrees; None (held back, `note` told why) when every host disagrees."""
    holds = guard.holds(run)
    if not holds:
        return {}
    serving = hosts_serving(workers(), wanted)
    if not serving:  # no worker serves it now: Dask holds it (the dispatcher's stranded-run rule applies)
        return {}
    host = guard.choose(holds, sorted(serving))
    if host is None:
        first = sorted(serving)[0]
        note(run, first, guard.conflict(first, holds) or ("?", "?", "?"))
        return None
    guard.claim(run, host, holds)
    guard.pinned[run.run_id] = serving[host]
    return {"workers": serving[host], "allow_other_workers": False}
