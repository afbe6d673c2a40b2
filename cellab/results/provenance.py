"""What a run depended on, for its manifest and the store: enough to run it again and to know what changed.

    provenance = {
      "controller": the controller's host (cellab version and commit, Python, kernel) and the built programs
                    found here (build/bin/*), by sha256,
      "agents":     each agent's own answer to the bus's `provenance` operation, asked at the end of the run: its
                    cellab and host, and its role's software (server: the BPF programs loaded, read back from the
                    kernel by tag, the loader and sender by hash, its namespace's TCP sysctls; eNB: srsenb by the
                    binary its process runs and the version it prints; core: each daemon's running binary and the
                    version they print; UE: the probe build, on a phone also its copy's hash there),
      "lab":        the embedded lab's own software (virtual: the cell's running binary; srsran-zmq: srsue, the
                    broker, the core's version),
      "files":      every file the run's parameters and schedules name (traces, schedule files, drive logs,
                    calibrations), by sha256 (None: missing when the run ran),
      "module_objects": {module: sha256 of its loaded programs' tags} for the modules the run's server agent
                    holds (from the agents' answers: what was loaded, not what the controller's build tree has),
      "server_sysctls": the server agent's namespace's TCP sysctls,
    }

`flatten` turns it into (dotted key, value) pairs: what the store's `run_software` table holds
(cellab.results.software_store) and what `cellab rerun` compares.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from cellab.errors import InputError, shown_key
from cellab.paths import find_program
from cellab.software import file_hash, host_record

PROGRAMS = ("cellab-cell", "cellab-probe", "cellab-send", "cellab-modules", "cellab-flowstat", "cellab-zmq-broker")
AGENT_TIMEOUT_S = 20.0  # the first answer hashes each binary whole (an srsenb: tens of MB)
#: provenance keys (the last part of a dotted key) that name where or when, not what: left out of comparisons
VOLATILE_KEYS = frozenset({"host", "path", "pid", "agent", "replaced_on_disk", "error"})


def software_versions() -> dict[str, Any]:
    """The controller's cellab (version, commit, local changes), Python, the kernel: the manifest's `software`."""
    record = host_record()
    return {k: record[k] for k in ("cellab", "python", "kernel", "cellab_commit", "cellab_local_changes")
            if k in record}


def programs() -> dict[str, str]:
    """The built programs on the controller's host, by hash (a rebuilt program changes its hash)."""
    out = {}
    for name in PROGRAMS:
        try:
            digest = file_hash(find_program(name))
        except Exception:  # noqa: BLE001 - a program this install lacks is simply not listed
            continue
        if digest:
            out[name] = digest
    return out


def named_files(params: dict[str, Any], schedules: dict[str, Any]) -> dict[str, str | None]:
    """Every file the run's parameters and schedules name, by hash (None: missing now)."""
    from cellab.campaign.model import PATH_PARAMS

    paths = [params[k] for k in PATH_PARAMS if isinstance(params.get(k), str)]
    for spec in schedules.values():
        for key in ("file", "drive_log", "calibration"):
            value = getattr(spec, key, None)
            if isinstance(value, str) and value != "auto":
                paths.append(value)
    return {p: file_hash(p) for p in paths}


def agent_reports(session: Any) -> dict[str, Any]:
    """Each agent's answer to `provenance` ({"error": why} for one that cannot say: an older agent, a lost one;
    a provenance question never fails a run)."""
    from cellab.bus import AgentLost, AgentTimeout, OperationError

    out: dict[str, Any] = {}
    for name in sorted(session.agents):
        try:
            out[name] = session.controller.request(name, "provenance", {}, timeout_s=AGENT_TIMEOUT_S)
        except (AgentLost, AgentTimeout, OperationError) as exc:
            out[name] = {"role": session.agents[name], "error": str(exc)[:300]}
    return out


def run_provenance(session: Any, params: dict[str, Any], schedules: dict[str, Any]) -> dict[str, Any]:
    """The manifest's `provenance` (see the module's docstring)."""
    lab_own = getattr(session.lab, "provenance", None)
    agents = agent_reports(session) if getattr(session, "controller", None) is not None else {}
    servers = [a.get("software") or {} for a in agents.values() if a.get("role") == "server"]
    modules = {name: held.get("sha256") for s in servers for name, held in (s.get("modules") or {}).items()}
    return {
        "controller": {**host_record(), "programs": programs()},
        "agents": agents,
        "lab": lab_own() if callable(lab_own) else {},
        "files": named_files(params, schedules),
        "module_objects": modules,
        "server_sysctls": servers[0].get("sysctls", {}) if servers else {},
    }


def flatten(value: Any, prefix: str = "") -> dict[str, str]:
    """Dotted key -> text of every leaf ({"agents": {"srv": {"cellab": "0.9"}}} -> {"agents.srv.cellab": "0.9"});
    None stays "None" (a missing file or program is part of what ran)."""
    if isinstance(value, dict):
        out: dict[str, str] = {}
        for key in sorted(value):
            out |= flatten(value[key], f"{prefix}.{key}" if prefix else str(key))
        return out
    if isinstance(value, list):
        return {prefix: ", ".join(map(str, value))} if prefix else {}
    return {prefix: str(value)} if prefix else {}


def by_role(agents: dict[str, Any]) -> dict[str, Any]:
    """The agents' answers keyed by role (server, enb, core, ue, ue2, ...; several of a role numbered in name
    order): two runs on two lab instances name their agents after their instance, their roles stay."""
    out: dict[str, Any] = {}
    for name in sorted(agents):
        role = str((agents[name] or {}).get("role") or name)
        key, n = role, 1
        while key in out:
            n += 1
            key = f"{role}{n}"
        out[key] = agents[name]
    return out


def comparable(provenance: dict[str, Any]) -> dict[str, str]:
    """flatten, agents by role, without the keys that name where or when (host names, paths, pids:
    VOLATILE_KEYS) and without `programs` (the controller's build in manifests written before `controller`)."""
    shown = {k: v for k, v in provenance.items() if k != "programs"}
    shown["agents"] = by_role(provenance.get("agents") or {})
    flat = flatten(shown)
    return {k: v for k, v in flat.items() if k.rpartition(".")[2] not in VOLATILE_KEYS}


def software_differences(original: dict[str, Any], again: dict[str, Any]) -> list[dict[str, str | None]]:
    """What differs between two runs' provenance, hashes first (a changed binary, module or file matters before
    a changed version string or sysctl): [{key, original, rerun}] (None: absent on that side)."""
    a, b = comparable(original or {}), comparable(again or {})
    keys = sorted((a.keys() | b.keys()), key=lambda k: (not _is_hash(k, a.get(k), b.get(k)), k))
    return [{"key": k, "original": a.get(k), "rerun": b.get(k)} for k in keys if a.get(k) != b.get(k)]


def _is_hash(key: str, *values: str | None) -> bool:
    last = key.rpartition(".")[2]
    return last in ("sha256", "tag") or ".files." in f".{key}" or key.startswith("module_objects.") or \
        any(v is not None and len(v) in (16, 64) and all(c in "0123456789abcdef" for c in v) for v in values)


_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def recorded_files(manifest: dict[str, Any], source: str | Path) -> dict[str, str]:
    """A manifest's provenance.files as `cellab run` writes them (absolute path -> sha256 hex), or an InputError
    naming the manifest and the entry: a rerun must not hash a device, or trip over a value of another type."""
    provenance = manifest.get("provenance")
    if provenance is None:
        return {}
    if not isinstance(provenance, dict):
        raise InputError(source, "provenance", f"a JSON {type(provenance).__name__}, not an object")
    files = provenance.get("files")
    if files is None:
        return {}
    if not isinstance(files, dict):
        raise InputError(source, "provenance.files", f"a JSON {type(files).__name__}, not an object (path: sha256)")
    for path, digest in files.items():
        if not (path.startswith("/") and "\0" not in path and len(path) <= 4096):
            raise InputError(source, f"provenance.files.{shown_key(path)[:80]}", "not an absolute file path")
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise InputError(source, f"provenance.files.{shown_key(path)[:80]}", f"{str(digest)[:70]!r} is no sha256",
                             ["64 lower-case hex digits"])
    return files


def changed_files(files: dict[str, str]) -> list[dict[str, str | None]]:
    """The files a run depended on (recorded_files) whose content is not what it was then: [{path, then, now}]
    (now None: gone, or no longer a regular file)."""
    out = []
    for path, then in sorted(files.items()):
        now = file_hash(path)
        if now != then:
            out.append({"path": path, "then": then, "now": now})
    return out
