"""Python side of `cellab-modules`: load, list, unload and configure the BPF server modules.

Every check a person can act on (unknown module, bad parameter, no BTF, not root) happens here
before the loader runs, so a bad request never leaves anything half-loaded.

Holders: a congestion control stays registered while someone holds it. A load for a network namespace
(`netns=`) is held by that namespace (a lab instance's server agent); any other load from Python is held
by this process (the loader drops the hold if the process dies), or by the host with `persistent=True`
(the command line: only an unload lets go). `unload` lets go of this caller's hold; the module goes when
nobody else holds it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cellab.contracts.server import (  # noqa: F401  (the room's names for the contract's list)
    CC_MODULES,
    SERVER_MODULES,
    TC_MODULES,
    ModuleInfo,
    ModuleName,
    check_param,
)
from cellab.errors import CellabError, InputError
from cellab.paths import find_program

MODULE_NAMES = SERVER_MODULES
Scope = Literal["netns", "host"]
KERNEL_BTF = Path("/sys/kernel/btf/vmlinux")
LOADER_TIMEOUT_S = 60.0
# What this process holds and has not let go of yet, as (module, netns or None): tests check that they
# clean up after themselves without touching what another process loaded on the same host.
LOADED_BY_THIS_PROCESS: set[tuple[str, str | None]] = set()
LOAD_HISTORY: list[str] = []  # every module this process loaded (held or registered), in order


class ModuleSettings(BaseModel):
    """What a campaign (or a person) asks of the server modules for one run."""

    model_config = ConfigDict(extra="forbid")

    load: list[ModuleName] = Field(default_factory=list, description="congestion controls to register")
    params: dict[ModuleName, dict[str, float]] = Field(default_factory=dict,
                                                       description="module -> parameter -> value")


class ModuleError(CellabError):
    """The loader failed on a request that passed validation (kernel refused, busy name, ...)."""


def _btf_path() -> Path:
    return Path(os.environ.get("CELLAB_KERNEL_BTF", str(KERNEL_BTF)))


def _run(args: list[str], env: dict[str, str] | None = None) -> str:
    argv = [str(find_program("cellab-modules")), *args]
    result = subprocess.run(
        argv, capture_output=True, text=True, timeout=LOADER_TIMEOUT_S, check=False, env=env
    )
    if result.returncode != 0:
        # the loader's own message names the module and the reason; keep its last lines
        lines = [ln for ln in result.stderr.splitlines() if ln.startswith("cellab-modules:")]
        raise ModuleError(lines[-1] if lines else result.stderr.strip()[-2000:] or f"{argv} failed")
    return result.stdout


def check_names(names: list[str] | tuple[str, ...], source: str = "modules") -> None:
    for i, name in enumerate(names):
        if name not in MODULE_NAMES:
            raise InputError(source, f"[{i}]", f"unknown module {name!r}", allowed=MODULE_NAMES)


def preflight(names: list[str] | tuple[str, ...], source: str = "modules") -> None:
    """Everything that can be checked before the kernel sees a program."""
    check_names(names, source)
    if os.geteuid() != 0:
        raise CellabError("loading BPF modules needs root (CAP_BPF and CAP_NET_ADMIN): run it with sudo")
    if not _btf_path().is_file():
        raise CellabError(
            f"no kernel BTF at {_btf_path()}: the BPF modules need a kernel built with CONFIG_DEBUG_INFO_BTF=y"
        )


def listing(netns: str | None = None) -> dict[str, dict[str, Any]]:
    """The loader's `list` as it is: per module also its holders, each namespace's own parameters
    (`netns_params`) and c2tcp's per-destination Targets (`dst_targets`). `netns`: `params` are the values
    a flow in that namespace sees."""
    data = json.loads(_run(["list", *(["--netns", netns] if netns else [])]))
    return {m["name"]: m for m in data["modules"]}


def describe(netns: str | None = None) -> dict[str, ModuleInfo]:
    """Every module the loader knows, loaded or not, with its parameters, their ranges and scopes
    (`netns`: the values a flow in that namespace sees)."""
    return {name: ModuleInfo(**m) for name, m in listing(netns).items()}


def holders(name: str) -> list[str]:
    """Who holds a registered module: `netns-NAME`, `pid-PID`, `host`."""
    check_names([name])
    return list(listing()[name].get("holders", []))


def param_scope(name: str, param: str) -> Scope:
    """"netns": each namespace may have its own value; "host": one value for the host."""
    check_names([name])
    return describe()[name].param_scopes.get(param, "host")


def _holder_args(netns: str | None, persistent: bool) -> list[str]:
    if netns:
        return ["--netns", netns]
    return [] if persistent else ["--holder-pid", str(os.getpid())]


def load(names: list[str] | tuple[str, ...], netns: str | None = None, dev: str | None = None,
         source: str = "modules", persistent: bool = False) -> None:
    """Load several modules; the loader undoes this call's loads if one of them fails. A congestion control
    already registered is reused, and held by `netns` (else by this process, or with `persistent` by the
    host) until unload; for tc modules `netns` is the namespace of `dev`."""
    preflight(names, source)
    if any(n in TC_MODULES for n in names) and not dev:
        raise InputError(source, "dev", "tc modules (or_ingress, burst_drop) need the interface to attach to")
    args = ["load", *names, *_holder_args(netns, persistent)]
    if dev:
        args += ["--dev", dev]
    before = set(loaded())
    _run(args, env=dict(os.environ))
    held = [n for n in names if n in CC_MODULES or n not in before]  # a tc module is only ours if we attached it
    if not persistent:
        LOADED_BY_THIS_PROCESS.update((n, netns if n in CC_MODULES else None) for n in held)
    LOAD_HISTORY.extend(held)


def unload(names: list[str] | tuple[str, ...] | None = None, source: str = "modules", netns: str | None = None,
           persistent: bool = False, force: bool = False) -> None:
    """Let go of the modules (None: every one this caller holds); a congestion control is unregistered when
    nobody else holds it (`force`: at once). A namespace's parameters stay while the module does
    (clear_params drops them; they go with the namespace). Established connections keep their congestion
    control. `persistent` and no names: everything nobody holds goes."""
    if names is not None:
        check_names(names, source)
    if os.geteuid() != 0:
        raise CellabError("unloading BPF modules needs root: run it with sudo")
    holder = _holder_args(netns, persistent)
    if names is None and not persistent:  # tc programs have no holders: those this process attached
        attached = sorted(n for n, _ in LOADED_BY_THIS_PROCESS if n in TC_MODULES)
        if attached:
            _run(["unload", *attached])
    _run(["unload", *(["--all"] if names is None else names), *holder, *(["--force"] if force else [])])
    if names is None:
        LOADED_BY_THIS_PROCESS.difference_update({h for h in LOADED_BY_THIS_PROCESS if h[1] == netns})
    else:
        LOADED_BY_THIS_PROCESS.difference_update({(n, netns if n in CC_MODULES else None) for n in names})


def loaded() -> list[str]:
    return [name for name, info in describe().items() if info.loaded]


def set_param(name: str, param: str, value: float, dst: str | None = None, source: str = "modules",
              netns: str | None = None) -> None:
    """Write one parameter; `dst` (c2tcp target_ms only) sets it for one destination prefix; `netns` for
    the flows of one network namespace only (the host-wide value stays for the others). Precedence for
    c2tcp's Target: the namespace's per-destination value, the namespace's, the host's per-destination
    value, the host's."""
    check_names([name], source)
    info = describe()[name]
    if param not in info.param_ranges:
        raise InputError(source, f"{name}.{param}", "unknown parameter", allowed=sorted(info.param_ranges))
    low, high, unit = info.param_ranges[param]
    if not low <= value <= high:
        raise InputError(source, f"{name}.{param}", f"{value} is out of range", allowed=[f"{low:g}..{high:g} {unit}"])
    if dst is not None and (name, param) != ("c2tcp", "target_ms"):
        raise InputError(source, f"{name}.{param}", "a destination prefix applies to c2tcp target_ms only")
    if netns is not None and info.param_scopes.get(param, "host") != "netns":
        raise InputError(source, f"{name}.{param}", "one value per host (scope host): it cannot be set per namespace")
    if not info.loaded:
        raise InputError(source, name, "module is not loaded", allowed=loaded())
    args = ["set", name, param, repr(float(value))]
    if dst is not None:
        args += ["--dst", dst]
    if netns is not None:
        args += ["--netns", netns]
    _run(args)


def clear_params(netns: str, names: list[str] | tuple[str, ...] | None = None, source: str = "modules") -> None:
    """Drop the parameters set for one namespace (its flows see the host-wide values again)."""
    if names is not None:
        check_names(names, source)
    _run(["clear", *(names or []), "--netns", netns])


def stats(name: str) -> dict[str, int]:
    """The module's counters (host-wide: every namespace's flows)."""
    check_names([name])
    data = json.loads(_run(["stats", name]))
    data.pop("module", None)
    return {k: int(v) for k, v in data.items()}


def flow_stats(name: str = "c2tcp", netns: str | None = None) -> list[dict[str, Any]]:
    """Per-flow records (c2tcp): each flow's namespace, Target (`target_ms`) and where it came from
    (`target_source`: host, host_dst, netns, netns_dst), alpha, Bad events, start/end (CLOCK_MONOTONIC ns;
    end 0 while the flow lives); `netns` keeps one namespace's flows. Oldest first."""
    check_names([name])
    data = json.loads(_run(["stats", name, "--flows", *(["--netns", netns] if netns else [])]))
    return list(data["flows"])


def available_congestion_controls() -> list[str]:
    return Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()


def check_settings(settings: ModuleSettings, source: str = "modules") -> None:
    """Every parameter named in settings exists and is in range (no root needed, nothing loaded)."""
    known = describe()
    for name, values in settings.params.items():
        if name not in settings.load and not known[name].loaded:
            raise InputError(source, f"params.{name}", "parameters for a module that is neither loaded nor in load",
                             allowed=settings.load or ["(list it under load)"])
        for param, value in values.items():
            check_param(known[name].param_ranges, param, value, source, f"params.{name}.{param}",
                        known[name].param_steps)
    if any(n in TC_MODULES for n in settings.load):
        raise InputError(source, "load", "tc modules need an interface: load them with load(names, netns, dev)",
                         allowed=CC_MODULES)


def apply_settings(settings: ModuleSettings, source: str = "modules") -> None:
    """Check everything first, then load and set (host-wide); a failure lets go of what this call loaded."""
    check_settings(settings, source)
    preflight(settings.load, source)
    held = False
    try:
        if settings.load:
            load(settings.load, source=source)
            held = True
        for name, values in settings.params.items():
            for param, value in values.items():
                set_param(name, param, value, source=source)
    except CellabError:
        if held:
            unload(settings.load)  # lets go of this call's holds; what others hold stays
        raise
