"""Run cellab-probe (optionally inside a network namespace) with an argv list and parse its summary.

The probe always writes its JSON summary, also when it fails (unreachable server, damaged pcap, no
capture privileges): the summary's `status` ("ok" | "partial" | "error"), `errors` and `missing` say
what happened, and `run_fetch` / `run_analyze` return it instead of raising, so a caller keeps the
partial measurements. Bad *requests* (a person's typo) raise InputError before anything runs.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from cellab.contracts.ue import SR_PROBE_MAX_S, FetchRequest, sr_probe_budget
from cellab.errors import CellabError, InputError, from_validation_error
from cellab.paths import find_program
from cellab.labs.proc import argv_in

PROBE_PROGRAM = "cellab-probe"


class AnalyzeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pcap: Path | None = None
    events: Path | None = None

    @model_validator(mode="after")
    def _one_input(self) -> AnalyzeRequest:
        if (self.pcap is None) == (self.events is None):
            raise ValueError("give exactly one of pcap or events")
        return self


class ProbeResult(BaseModel):
    """The probe's exit code, its summary (always present unless the program could not start) and files."""

    returncode: int
    summary: dict[str, Any]
    summary_path: Path
    artifacts: dict[str, Path]
    stderr: str

    @property
    def status(self) -> str:
        return str(self.summary.get("status", "error"))

    @property
    def sr_estimate(self) -> dict[str, Any]:
        return dict(self.summary.get("sr_estimate") or {})


def validate_fetch(values: dict[str, Any], source: str = "probe fetch request") -> FetchRequest:
    try:
        return FetchRequest.model_validate(values)
    except ValidationError as exc:
        raise from_validation_error(source, exc) from None


def fetch_argv(req: FetchRequest, out_dir: Path, name: str, program: Path) -> tuple[list[str], dict[str, Path]]:
    """argv for one fetch and the files it will write (summary, logs) under out_dir."""
    files = {"summary": out_dir / f"{name}-summary.json"}
    argv = [str(program), "fetch", "--server", req.server, "--port", str(req.port),
            "--control", req.control, "--capture", req.capture, "--timeout", f"{req.timeout_s:g}",
            "--connect-timeout", f"{req.connect_timeout_s:g}", "--rcvbuf", str(req.rcvbuf_bytes),
            "--summary", str(files["summary"])]
    for flow in req.flows:
        argv += ["--flow", flow.spec()]
    if req.interface:
        argv += ["--iface", req.interface]
    if req.packet_log:
        files["packet_log"] = out_dir / f"{name}-packets.csv"
        argv += ["--log", str(files["packet_log"])]
    if req.ms_log:
        files["ms_log"] = out_dir / f"{name}-ms.csv"
        argv += ["--ms-log", str(files["ms_log"])]
    if req.exll_alpha_pkts is not None:
        argv += ["--exll-alpha", f"{req.exll_alpha_pkts:g}"]
    if req.exll_gamma is not None:
        argv += ["--exll-gamma", f"{req.exll_gamma:g}"]
    if req.dfcsd_beta_pkts is not None:
        argv += ["--dfcsd-beta", f"{req.dfcsd_beta_pkts:g}"]
    if req.sr_probes:
        argv += ["--sr-probes", str(req.sr_probes)]
    if req.sr_probes_max is not None:
        argv += ["--sr-probes-max", str(req.sr_probes_max)]
    if req.stack_tti_ms is not None:
        argv += ["--stack-tti-ms", f"{req.stack_tti_ms:.4f}"]
    return argv, files


OnStart = Callable[[subprocess.Popen], None]


def _run(argv: list[str], netns: str | None, summary_path: Path, files: dict[str, Path],
         timeout_s: float, on_start: OnStart | None = None) -> ProbeResult:
    summary_path.parent.mkdir(parents=True, exist_ok=True)
    # Own session: a caller's safe_state can signal the probe and what `ip netns exec` started.
    proc = subprocess.Popen(argv_in(netns, argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    if on_start is not None:
        on_start(proc)
    try:
        _, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.communicate()
        raise CellabError(f"cellab-probe did not finish within {timeout_s:g} s") from exc
    if proc.returncode == 2:  # usage error: our argv was wrong, not the measurement
        raise CellabError(f"cellab-probe rejected its arguments: {stderr.strip()}")
    try:
        summary = json.loads(summary_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CellabError(f"cellab-probe wrote no readable summary ({exc}); stderr: {stderr.strip()[-400:]}") from exc
    artifacts = {k: p for k, p in files.items() if p.exists()}
    return ProbeResult(returncode=proc.returncode, summary=summary, summary_path=summary_path,
                       artifacts=artifacts, stderr=stderr)


def run_fetch(req: FetchRequest, out_dir: Path, name: str = "probe", netns: str | None = None,
              program: Path | None = None, on_start: OnStart | None = None) -> ProbeResult:
    """Run one fetch; returns the summary also when the probe reports errors (see module doc)."""
    program = program or find_program(PROBE_PROGRAM)
    argv, files = fetch_argv(req, out_dir, name, program)
    last_start_s = max(f.start_ms for f in req.flows) / 1000
    probes_s = sr_probe_budget(req.sr_probes, req.sr_probes_max) * SR_PROBE_MAX_S + 1
    return _run(argv, netns, files["summary"], files, req.timeout_s + last_start_s + probes_s + 15, on_start)


def run_analyze(req: AnalyzeRequest, out_dir: Path, name: str = "analyze", netns: str | None = None,
                program: Path | None = None, timeout_s: float = 600, on_start: OnStart | None = None) -> ProbeResult:
    """`cellab-probe analyze` on a pcap or an event log."""
    source = req.pcap if req.pcap is not None else req.events
    assert source is not None
    if not Path(source).is_file():
        raise InputError(source, "pcap" if req.pcap is not None else "events", "file does not exist")
    program = program or find_program(PROBE_PROGRAM)
    summary_path = out_dir / f"{name}-summary.json"
    option = "--pcap" if req.pcap is not None else "--events"
    argv = [str(program), "analyze", option, str(source), "--summary", str(summary_path)]
    return _run(argv, netns, summary_path, {"summary": summary_path}, timeout_s, on_start)
