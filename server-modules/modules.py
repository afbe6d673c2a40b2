"""Python side of `cellab-modules`: load, list, unload and configure the BPF server modules.

Every check a person can act on (unknown module, bad parameter, no BTF, not root) happens here
before the loader runs, so a bad request never leaves anything half-loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

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
KERNEL_BTF = Path("/sys/kernel/btf/vmlinux")
LOADER_TIMEOUT_S = 60.0
# Modules this process registered and has not unloaded yet: tests check that they clean up after
# themselves without touching what another process loaded on the same host.
LOADED_BY_THIS_PROCESS: set[str] = set()
LOAD_HISTORY: list[str] = []  # every module this process registered, in order


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


def describe() -> dict[str, ModuleInfo]:
    """Every module the loader knows, loaded or not, with its parameters and their ranges."""
    data = json.loads(_run(["list"]))
    return {m["name"]: ModuleInfo(**m) for m in data["modules"]}


def load(names: list[str] | tuple[str, ...], netns: str | None = None, dev: str | None = None,
         source: str = "modules") -> None:
    """Load several modules; the loader undoes this call's loads if one of them fails."""
    preflight(names, source)
    if any(n in TC_MODULES for n in names) and not dev:
        raise InputError(source, "dev", "tc modules (or_ingress, burst_drop) need the interface to attach to")
    args = ["load", *names]
    if netns:
        args += ["--netns", netns]
    if dev:
        args += ["--dev", dev]
    before = set(loaded())
    _run(args, env=dict(os.environ))
    fresh = [n for n in names if n not in before]
    LOADED_BY_THIS_PROCESS.update(fresh)
    LOAD_HISTORY.extend(fresh)


def unload(names: list[str] | tuple[str, ...] | None = None, source: str = "modules") -> None:
    """Unpin the modules' links (None = all). Established connections keep their congestion control."""
    if names is not None:
        check_names(names, source)
    if os.geteuid() != 0:
        raise CellabError("unloading BPF modules needs root: run it with sudo")
    _run(["unload", "--all"] if names is None else ["unload", *names])
    if names is None:
        LOADED_BY_THIS_PROCESS.clear()
    else:
        LOADED_BY_THIS_PROCESS.difference_update(names)


def loaded() -> list[str]:
    return [name for name, info in describe().items() if info.loaded]


def set_param(name: str, param: str, value: float, dst: str | None = None, source: str = "modules") -> None:
    """Write one parameter; `dst` (c2tcp target_ms only) sets it for one destination prefix."""
    check_names([name], source)
    info = describe()[name]
    if param not in info.param_ranges:
        raise InputError(source, f"{name}.{param}", "unknown parameter", allowed=sorted(info.param_ranges))
    low, high, unit = info.param_ranges[param]
    if not low <= value <= high:
        raise InputError(source, f"{name}.{param}", f"{value} is out of range", allowed=[f"{low:g}..{high:g} {unit}"])
    if dst is not None and (name, param) != ("c2tcp", "target_ms"):
        raise InputError(source, f"{name}.{param}", "a destination prefix applies to c2tcp target_ms only")
    if not info.loaded:
        raise InputError(source, name, "module is not loaded", allowed=loaded())
    args = ["set", name, param, repr(float(value))]
    if dst is not None:
        args += ["--dst", dst]
    _run(args)


def stats(name: str) -> dict[str, int]:
    check_names([name])
    data = json.loads(_run(["stats", name]))
    data.pop("module", None)
    return {k: int(v) for k, v in data.items()}


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
            check_param(known[name].param_ranges, param, value, source, f"params.{name}.{param}")
    if any(n in TC_MODULES for n in settings.load):
        raise InputError(source, "load", "tc modules need an interface: load them with load(names, netns, dev)",
                         allowed=CC_MODULES)


def apply_settings(settings: ModuleSettings, source: str = "modules") -> None:
    """Check everything first, then load and set; a failure unloads what this call loaded."""
    check_settings(settings, source)
    preflight(settings.load, source)
    before = set(loaded())
    try:
        if settings.load:
            load(settings.load, source=source)
        for name, values in settings.params.items():
            for param, value in values.items():
                set_param(name, param, value, source=source)
    except CellabError:
        fresh = [n for n in settings.load if n not in before]
        if fresh:
            unload(fresh)
        raise
