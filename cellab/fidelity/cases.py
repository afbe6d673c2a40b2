"""Fidelity: the virtual cell (lab `virtual`) against the real srsRAN 4G stack over ZMQ (lab `srsran-zmq`),
the same cases run on both, the virtual repeats on the real repeats' own stack clocks (cellab.fidelity.clocks),
and compared cell by cell against a tolerance table.

Cases (docs/fidelity.md):
    idle-<n>prb-sr<p>   idle uplink ICMP probes (cellab-probe's SR probes): RTT min/avg/max
    dl-<cc>-<n>prb      an iperf3 download with ping every 200 ms: throughput, RTT under load
    ul-cubic-<n>prb     an iperf3 Cubic upload with ping every 200 ms: throughput, RTT under load (the UE's
                        uplink queue: srsue's 256 packets on both)
    snr-<d>db           a Cubic download at a downlink SNR step (each lab given the attenuation that makes that
                        SNR, from its snr_at_0db_attenuation_db): the eNB's CQI and MCS while it sends
    two-ue-<n>prb       two UEs with a Cubic download each: each UE's share of the sum, its RTT
    recovery-<n>prb     a Cubic download with a 3 s radio outage: the radio link failure after its start, the
                        re-attach and throughput back after its end (cellab.fidelity.recovery)

Each lab gets five campaigns (one workload per campaign: the probe for the idle cases, iperf3 downloads, iperf3
uploads; the two-UE case alone, so no second UE is attached during the others; the recovery case alone, so its
fault disturbs no other case),
written here as YAML and run by `cellab run` (the runner, the store and the normal report). The virtual
campaigns add the cell's fidelity settings (VIRTUAL_ONLY); a parameter or UE count a lab does not take (yet)
is left out and said so, and its cells print "not measured: <reason>".
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from jinja2 import Environment, select_autoescape

from cellab.errors import CellabError
from cellab.fidelity.judge import (
    KNOWN_DEVIATIONS,
    REAL_LAB,
    TOLERANCES,
    VIRTUAL_LAB,
    KnownDeviation,
    Row,
    compare,
    shares,
)
from cellab.fidelity.model import CaseValues, Grid
from cellab.fidelity.clocks import case_of
from cellab.fidelity.recovery import CASE_PREFIX, KIND, recovery_campaign, recovery_levels, recovery_values
from cellab.fidelity.recovery import METRICS as RECOVERY_METRICS
from cellab.results.store import ResultStore, write_atomic

__all__ = ["KNOWN_DEVIATIONS", "TOLERANCES", "KnownDeviation", "Row", "compare", "shares"]  # the table's judge

VIRTUAL_ONLY = {"core_delay_ms": 3}  # the virtual cell's fidelity setting: srsEPC's S1/SGi path delay
SHARED = {"rlc_queue": "srsenb"}  # both labs: the eNB's RLC queue as srsenb sizes it
IDLE_FLOW_BYTES = 20_000  # the probe workload needs a flow after its SR probes: a small one
PING_INTERVAL_MS = 200.0  # ping during the downloads
CAMPAIGN_KINDS = ("idle", "load", "upload", "two-ue", "recovery")  # each lab's campaigns, in the order they run
NO_NEW_TB_MCS = 255  # the TTI log's mcs when the TTI sent no new TB (emulator/ttilog.h)
MIN_SENDING_BPS = 1e6  # an eNB report period counts for CQI/MCS when the UE received at least this


FULL = Grid()
QUICK = Grid(n_prb=(25,), sr_period_ms=(20,), download_ccs=("cubic",), download_n_prb=(25,), download_s=8.0,
             snr_db=(30, 10), repeats=3)
TEST = Grid(n_prb=(25,), sr_period_ms=(20,), download_ccs=("cubic",), download_n_prb=(25,), download_s=8.0,
            snr_db=(), upload_n_prb=(), two_ues=False, recovery_n_prb=(), max_attempts=1, repeats=1)
GRIDS = {"full": FULL, "quick": QUICK, "test": TEST}


# ---------------------------------------------------------------- cases and campaigns
def idle_case(n_prb: int, sr_period_ms: int) -> str:
    return f"idle-{n_prb}prb-sr{sr_period_ms}"


def download_case(cc: str, n_prb: int) -> str:
    return f"dl-{cc}-{n_prb}prb"


def upload_case(n_prb: int) -> str:
    return f"ul-cubic-{n_prb}prb"


def snr_case(snr_db: float) -> str:
    return f"snr-{snr_db:g}db"


def two_ue_case(n_prb: int) -> str:
    return f"two-ue-{n_prb}prb"


@dataclass
class Plan:
    """One lab's campaigns (kind -> campaign: CAMPAIGN_KINDS) and what they leave out."""

    lab: str
    campaigns: dict[str, dict[str, Any]] = field(default_factory=dict)
    omitted_params: dict[str, str] = field(default_factory=dict)  # parameter -> why
    missing_cases: dict[str, str] = field(default_factory=dict)  # case -> why it is not run on this lab


def lab_capabilities(lab: str) -> tuple[set[str], int, float | None]:
    """(run parameter names, most UEs, SNR at 0 dB attenuation) of an embedded lab, from its registered class."""
    from cellab.campaign.model import params_model_for
    from cellab.labs import embedded_lab_class

    lab_class = embedded_lab_class(lab)
    return (set(params_model_for(lab, f"lab {lab}").model_fields), lab_class.max_ues,
            lab_class.snr_at_0db_attenuation_db)


def load_levels(grid: Grid, snr_at_0db: float | None = None) -> dict[str, dict[str, Any]]:
    """The iperf3 cases in an order that restarts srsenb least: by n_prb, the SNR steps where the
    downloads already set the shared n_prb (attenuation needs no restart), two UEs last. An SNR step is the
    attenuation that gives that SNR on this lab (attenuation_db None: the lab cannot say, or cannot reach it)."""
    levels: dict[str, dict[str, Any]] = {}
    for n_prb in sorted(set(grid.download_n_prb) | set(grid.upload_n_prb) | {grid.shared_n_prb}):
        if n_prb in grid.download_n_prb:
            for cc in grid.download_ccs:
                levels[download_case(cc, n_prb)] = {"n_prb": n_prb, "cc": cc, "attenuation_db": 0}
        if n_prb in grid.upload_n_prb:
            levels[upload_case(n_prb)] = {"n_prb": n_prb, "cc": "cubic", "attenuation_db": 0}
        if n_prb == grid.shared_n_prb:
            for snr_db in grid.snr_db:
                db = None if snr_at_0db is None or snr_at_0db < snr_db else round(snr_at_0db - snr_db, 2)
                levels[snr_case(snr_db)] = {"n_prb": n_prb, "cc": "cubic", "attenuation_db": db}
    if grid.two_ues:
        levels[two_ue_case(grid.shared_n_prb)] = {"n_prb": grid.shared_n_prb, "cc": "cubic", "attenuation_db": 0,
                                                  "ues": 2}
    return levels


def build_plan(lab: str, grid: Grid, capabilities: tuple[set[str], int, float | None] | None = None) -> Plan:
    params, max_ues, snr_at_0db = capabilities or lab_capabilities(lab)
    fixed: dict[str, Any] = {}
    plan = Plan(lab)
    wanted = dict(SHARED) | (dict(VIRTUAL_ONLY) if lab == VIRTUAL_LAB else {})
    for name, value in wanted.items():
        if name in params:
            fixed[name] = value
        else:
            plan.omitted_params[name] = f"lab {lab} has no run parameter {name} (yet): ran with its default"
    common = {"repeat": grid.repeats, "order": {"mode": "sequential"}, "timeouts": {"run_s": 180, "request_s": 20},
              "retry": {"max_attempts": grid.max_attempts, "backoff_s": 2}}
    idle_levels = {idle_case(n, p): {"n_prb": n, "sr_period_ms": p} for n in grid.n_prb for p in grid.sr_period_ms}
    plan.campaigns["idle"] = {"name": f"fidelity-idle-{lab}", "lab": lab, **common,
                              "description": "fidelity: idle uplink ICMP probes per n_prb and SR period",
                              "factors": {"case": idle_levels}, "fixed": fixed,
                              "workload": {"tool": "probe", "duration_s": 1, "size_bytes": IDLE_FLOW_BYTES,
                                           "sr_probes": grid.idle_pings}}
    # the two-UE case in a campaign of its own: the session brings up the most UEs any run asks for, and a
    # second srsue attached (decoding the whole downlink) would load the host during the one-UE runs
    by_kind: dict[str, dict[str, Any]] = {kind: {} for kind in CAMPAIGN_KINDS if kind != "idle"}
    for case, level in load_levels(grid, snr_at_0db).items():
        if level["attenuation_db"] is None:
            plan.missing_cases[case] = (f"lab {lab} does not say which SNR an attenuation gives"
                                        if snr_at_0db is None else f"lab {lab} reaches at most SNR {snr_at_0db:g} dB")
        elif level.get("ues", 1) > max_ues:
            plan.missing_cases[case] = f"lab {lab} serves at most {max_ues} UE(s) (yet)"
        else:
            kind = "two-ue" if level.get("ues", 1) > 1 else "upload" if case.startswith("ul-") else "load"
            by_kind[kind][case] = level
    for kind, levels in by_kind.items():
        if levels:
            direction = "upload" if kind == "upload" else "download"
            plan.campaigns[kind] = {
                "name": f"fidelity-{kind}-{lab}", "lab": lab, **common,
                "description": f"fidelity: {kind} cases, iperf3 {direction}s with ping",
                "factors": {"case": levels}, "fixed": fixed | {"sr_period_ms": grid.download_sr_ms},
                "workload": {"tool": "iperf3", "kind": direction, "duration_s": grid.download_s,
                             "ping_interval_ms": PING_INTERVAL_MS}}
    recovery = recovery_campaign(lab, grid, fixed | {"sr_period_ms": grid.download_sr_ms}, common, PING_INTERVAL_MS)
    if recovery:
        plan.campaigns[KIND] = recovery
    return plan


@dataclass
class CampaignResult:
    lab: str
    kind: str  # one of CAMPAIGN_KINDS
    folder: Path | None
    error: str | None = None  # the campaign as a whole failed


def run_plan(plan: Plan, out_dir: Path, prefix: str, report: bool = True, timeout_s: float = 3600) -> list[CampaignResult]:
    """`cellab run` of the plan's campaigns; each result folder under out_dir (its normal report unless
    report=False)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for kind, campaign in plan.campaigns.items():
        path = out_dir / f"{campaign['name']}.yaml"
        path.write_text(yaml.safe_dump(campaign, sort_keys=False))
        before = {p for p in out_dir.iterdir() if p.is_dir()}
        argv = [sys.executable, "-m", "cellab", "run", str(path), "--out", str(out_dir), "--prefix", f"{prefix}{kind[0]}"]
        proc = subprocess.run(argv + ([] if report else ["--no-report"]), capture_output=True, text=True,
                              timeout=timeout_s)
        made = sorted({p for p in out_dir.iterdir() if p.is_dir()} - before)
        folder = made[-1] if made else None
        error = None
        if folder is None or not (folder / "results.sqlite").is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            error = f"cellab run failed (exit {proc.returncode}): {' | '.join(tail)}"
            folder = None
        results.append(CampaignResult(plan.lab, kind, folder, error))
    return results


# ---------------------------------------------------------------- reading results
def _stats(samples: list[float]) -> tuple[float, float, float]:
    return min(samples), statistics.fmean(samples), max(samples)


def _fmt3(triple: tuple[float, float, float]) -> str:
    return "/".join(f"{v:.1f}" for v in triple)


def idle_values(run_dir: Path) -> CaseValues:
    """The probe's idle uplink ICMP RTTs (its summary's uplink_probes) of the run's first UE."""
    summaries = sorted((run_dir / "ues").glob("*/*-summary.json"))
    if not summaries:
        return CaseValues(error=f"{run_dir}: no cellab-probe summary")
    try:
        probes = json.loads(summaries[0].read_text()).get("uplink_probes") or {}
    except (OSError, ValueError) as exc:
        return CaseValues(error=f"{summaries[0]}: {exc}")
    rtts = [float(v) for v in probes.get("rtt_ms") or [] if isinstance(v, (int, float))]
    requested = probes.get("requested")
    if isinstance(requested, int) and requested > 0:
        rtts = rtts[:requested]  # the probe sends up to twice as many when its SR estimate is unclear
    if not rtts:
        return CaseValues(error=f"{summaries[0]}: no idle probe answered ({probes.get('error') or 'none received'})")
    lo, avg, hi = _stats(rtts)
    return CaseValues({"idle_rtt_avg_ms": avg, "idle_rtt_min_ms": lo, "idle_rtt_max_ms": hi},
                      {"idle_rtt_avg_ms": f"min/avg/max {_fmt3((lo, avg, hi))} ms, {len(rtts)} probes"})


def download_values(metrics: dict[str, Any]) -> CaseValues:
    out = CaseValues()
    if metrics.get("throughput_bps") is not None:
        out.values["throughput_mbps"] = float(metrics["throughput_bps"]) / 1e6
    if metrics.get("rtt_mean_ms") is not None:
        out.values["load_rtt_avg_ms"] = float(metrics["rtt_mean_ms"])
        lo, hi = metrics.get("rtt_min_ms"), metrics.get("rtt_max_ms")
        if lo is not None and hi is not None:
            out.detail["load_rtt_avg_ms"] = f"min/avg/max {_fmt3((lo, metrics['rtt_mean_ms'], hi))} ms"
    return out


def enb_radio_values(run_dir: Path) -> CaseValues:
    """The eNB's reported DL CQI and MCS (srsenb's JSON report, the eNB agent's `ue_metrics` telemetry),
    averaged over the report periods in which the UE received at least MIN_SENDING_BPS. The run's telemetry
    holds only report periods of its own workload (cellab.run.telemetry files each sample by srsenb's own report
    time: the report reaches the agent up to ~3 s late, and filed by arrival an SNR 10 dB step once averaged
    CQI 8.1 with three periods of the SNR 30 dB run before it, 5.0 without)."""
    rows = []
    for path in sorted((run_dir / "telemetry").glob("*.jsonl")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if not (isinstance(row, dict) and row.get("topic") == "ue_metrics" and
                    (row.get("dl_bitrate_bps") or 0) >= MIN_SENDING_BPS):
                continue
            rows.append(row)
    cqi = [float(r["dl_cqi"]) for r in rows if isinstance(r.get("dl_cqi"), (int, float))]
    mcs = [float(r["dl_mcs"]) for r in rows if isinstance(r.get("dl_mcs"), (int, float))]
    if not cqi:
        return CaseValues(error=f"{run_dir}: no eNB report period with downlink traffic")
    return CaseValues({"cqi": statistics.fmean(cqi), "mcs": statistics.fmean(mcs)} if mcs else
                      {"cqi": statistics.fmean(cqi)}, {"cqi": f"{len(cqi)} report periods"})


def cell_radio_values(run_dir: Path) -> CaseValues:
    """The virtual cell's CQI and MCS in the TTIs it scheduled the first UE's downlink (its TTI log)."""
    from cellab.contracts.registry import load

    path = run_dir / "cell_tti.bin"
    if not path.is_file():
        return CaseValues(error=f"{path} missing")
    rec = load("cellab.services", "ttilog", "TTI log reader")(path).ue(0)
    sent = rec[rec["dl_prb"] > 0]
    if len(sent) == 0:
        return CaseValues(error=f"{path}: no TTI with a downlink allocation")
    new_tbs = sent[sent["mcs"] != NO_NEW_TB_MCS]  # a HARQ retransmission carries no MCS of its own
    if len(new_tbs) == 0:
        return CaseValues(error=f"{path}: no TTI with a new downlink TB")
    return CaseValues({"cqi": float(sent["cqi"].mean()), "mcs": float(new_tbs["mcs"].mean())},
                      {"cqi": f"{len(sent)} scheduled TTIs, {len(new_tbs)} with a new TB"})


def radio_values(run_dir: Path) -> CaseValues:
    return cell_radio_values(run_dir) if (run_dir / "cell_tti.bin").is_file() else enb_radio_values(run_dir)


def read_results(results: list[CampaignResult]) -> dict[str, list[CaseValues]]:
    """Case name -> what each of its runs measured (a run that did not finish ok: its status and error), from
    the campaigns' result folders (results.sqlite and run folders)."""
    cases: dict[str, list[CaseValues]] = {}
    for result in results:
        if result.folder is None:
            continue
        store = ResultStore.open(result.folder)
        ue_rows: dict[str, dict[str, dict[str, Any]]] = {}
        for row in store.ue_rows():
            ue_rows.setdefault(row["run_id"], {})[row["ue"]] = row["metrics"] or {}
        for row in store.rows():
            case = row["factors"].get("case")
            if isinstance(case, str):
                case = case_of(case)  # a virtual level names the real repeat whose clock it ran on
                cases.setdefault(case, []).append(_run_values(store, row, case, ue_rows))
    return cases


def _run_values(store: ResultStore, row: dict[str, Any], case: str,
                ue_rows: dict[str, dict[str, dict[str, Any]]]) -> CaseValues:
    if row["status"] != "ok":
        return CaseValues(error=f"run {row['status']}: {(row['error'] or '')[:160]}")
    run_dir = store.run_dir(row["run_id"])
    if case.startswith("idle-"):
        return idle_values(run_dir)
    if case.startswith("snr-"):
        return radio_values(run_dir)
    if case.startswith("two-ue-"):
        return two_ue_values(ue_rows.get(row["run_id"], {}))
    if case.startswith(CASE_PREFIX):
        return recovery_values(row["metrics"] or {}, run_dir, store.manifest(row["run_id"]))
    return download_values(row["metrics"] or {})


def two_ue_values(per_ue: dict[str, dict[str, Any]]) -> CaseValues:
    rates = {ue: float(m["throughput_bps"]) for ue, m in per_ue.items() if m.get("throughput_bps") is not None}
    if len(rates) < 2:
        return CaseValues(error=f"throughput of {len(rates)} UE(s), two needed")
    out = CaseValues()
    try:
        for ue, share in shares(rates).items():
            out.values[f"share.{ue}"] = share
            out.detail[f"share.{ue}"] = f"{rates[ue] / 1e6:.1f} Mbit/s"
    except CellabError as exc:
        return CaseValues(error=str(exc))
    for ue, m in per_ue.items():
        if m.get("rtt_mean_ms") is not None:
            out.values[f"load_rtt_avg_ms.{ue}"] = float(m["rtt_mean_ms"])
    return out


# ---------------------------------------------------------------- the table
CASE_METRICS = {"idle-": ("idle_rtt_avg_ms",), "dl-": ("throughput_mbps", "load_rtt_avg_ms"),
                "ul-": ("throughput_mbps", "load_rtt_avg_ms"),
                "snr-": ("cqi", "mcs"), "two-ue-": ("share.ue0", "share.ue1", "load_rtt_avg_ms.ue0",
                                                    "load_rtt_avg_ms.ue1"),
                CASE_PREFIX: RECOVERY_METRICS}


def case_names(grid: Grid) -> list[str]:
    idle = [idle_case(n, p) for n in grid.n_prb for p in grid.sr_period_ms]
    return idle + list(load_levels(grid)) + list(recovery_levels(grid))


def fidelity_rows(cases: list[str], real: dict[str, Any], virtual: dict[str, Any],
                  missing: dict[str, str] | None = None,
                  deviations: tuple[KnownDeviation, ...] = KNOWN_DEVIATIONS) -> list[Row]:
    """One row per case and metric: real against virtual over each lab's valid runs of the case (a CaseValues
    or a list of them per case); `missing`: case -> why a lab did not run it. Runs that failed or were invalid
    are left out and counted in the row's detail; a lab with none valid leaves the case not measured."""
    missing = missing or {}
    rows = []
    for case in cases:
        metrics = next(m for prefix, m in CASE_METRICS.items() if case.startswith(prefix))
        runs = {lab: _as_list(values.get(case)) for lab, values in ((REAL_LAB, real), (VIRTUAL_LAB, virtual))}
        valid = {lab: [cv for cv in rs if not cv.error] for lab, rs in runs.items()}
        why = missing.get(case) or _why_missing(runs[REAL_LAB], REAL_LAB) or _why_missing(runs[VIRTUAL_LAB],
                                                                                         VIRTUAL_LAB)
        left_out = "; ".join(f"{lab}: {len(rs) - len(valid[lab])} of {len(rs)} runs left out "
                             f"({next(cv.error for cv in rs if cv.error)})"
                             for lab, rs in runs.items() if 0 < len(valid[lab]) < len(rs))
        for key in metrics:
            base, _, ue = key.partition(".")
            samples = {lab: [cv.values[key] for cv in cvs if key in cv.values] for lab, cvs in valid.items()}
            detail = "" if why else "; ".join(
                [f"{name}: {cvs[0].detail[key]}" for name, cvs in (("real", valid[REAL_LAB]),
                                                                  ("virtual", valid[VIRTUAL_LAB]))
                 if cvs and key in cvs[0].detail] + ([left_out] if left_out else []))
            rows.append(compare(f"{case} {ue}".strip(), base, samples[REAL_LAB], samples[VIRTUAL_LAB],
                                why or _why_no_value(valid, samples, key), detail, deviations))
    return rows


def _as_list(values: CaseValues | list[CaseValues] | None) -> list[CaseValues]:
    return [] if values is None else values if isinstance(values, list) else [values]


def _why_no_value(valid: dict[str, list[CaseValues]], samples: dict[str, list[float]], key: str) -> str | None:
    """A lab whose valid runs have no value of the metric, with the reason its first run gives."""
    return next((f"{lab}: {cv.missing[key]}" for lab, cvs in valid.items() if not samples[lab]
                 for cv in cvs if key in cv.missing), None)


def _why_missing(runs: list[CaseValues], lab: str) -> str | None:
    if not runs:
        return f"no run on {lab}"
    errors = [cv.error for cv in runs if cv.error]
    if len(errors) == len(runs):
        return f"{lab}: {errors[0]}" + (f" (and {len(errors) - 1} more run(s))" if len(errors) > 1 else "")
    return None


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _interval_text(row: Row) -> str:
    return "-" if row.low is None or row.high is None else f"{row.low:.2f}..{row.high:.2f}"


def format_table(rows: list[Row]) -> str:
    head = (f"{'case':<22} {'metric':<24} {'real':>8} {'virtual':>8} {'ratio':>6} {'95 % interval':>13} "
            f"{'runs':>5} {'tolerance':>16}  verdict")
    lines = [head, "-" * len(head)]
    for row in rows:
        lines.append(f"{row.case:<22} {row.metric:<24} {_num(row.real):>8} {_num(row.virtual):>8} "
                     f"{_num(row.ratio):>6} {_interval_text(row):>13} {row.n_real:>2}/{row.n_virtual:<2} "
                     f"{row.tolerance:>16}  {row.verdict}")
        if row.detail:
            lines.append(f"{'':<22}   {row.detail}")
    counts = {k: sum(1 for r in rows if _verdict_kind(r) == k) for k in ("PASS", "FAIL", "undecided", "known", "not")}
    lines.append(f"{counts['PASS']} pass, {counts['FAIL']} fail, {counts['undecided']} undecided, "
                 f"{counts['known']} known deviation(s), {counts['not']} not measured")
    return "\n".join(lines)


def _verdict_kind(row: Row) -> str:
    first = row.verdict.split()[0].rstrip(":")
    return first if first in ("known", "not", "undecided") else row.verdict


_PAGE = Environment(autoescape=select_autoescape(default=True)).from_string("""<!doctype html>
<html><head><meta charset="utf-8"><title>cellab fidelity: virtual vs srsran-zmq</title>
<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}td,th{border:1px solid #ccc;
padding:3px 7px;text-align:right}td.l,th.l{text-align:left}.PASS{background:#dfd}.FAIL{background:#fdd}
.known{background:#ffd}.not{background:#eee}.undecided{background:#fec}</style></head><body>
<h1>Fidelity: virtual cell vs srsRAN over ZMQ</h1>
<p>{{ conditions.grid }} grid; started {{ conditions.started }}; load average {{ conditions.load }}.
Ratio = virtual / real of the medians over each lab's valid runs; the 95 % interval (bootstrap over the runs) is
of the ratio, or of virtual - real for absolute tolerances; a cell passes when it lies inside the tolerance, fails
when wholly outside, and is undecided across it. Both labs: {{ conditions.shared }}; the virtual cell also {{ conditions.virtual_only }}.
Tolerances and known deviations: docs/fidelity.md.</p>
<ul>{% for note in conditions.notes %}<li>{{ note }}</li>{% endfor %}</ul>
<p>Campaign result folders (each with its report.html):
{% for f in conditions.folders %}<br><a href="{{ f }}/report.html">{{ f }}</a>{% endfor %}</p>
<table><tr><th class="l">case</th><th class="l">metric</th><th>real</th><th>virtual</th><th>ratio</th>
<th>95 % interval</th><th>runs (real/virtual)</th><th>tolerance</th><th class="l">verdict</th><th class="l">detail</th></tr>
{% for r in rows %}<tr class="{{ kind(r) }}"><td class="l">{{ r.case }}</td><td class="l">{{ r.metric }}</td>
<td>{{ num(r.real) }}</td><td>{{ num(r.virtual) }}</td><td>{{ num(r.ratio) }}</td><td>{{ interval(r) }}</td>
<td>{{ r.n_real }}/{{ r.n_virtual }}</td><td>{{ r.tolerance }}</td>
<td class="l">{{ r.verdict }}</td><td class="l">{{ r.detail }}</td></tr>
{% endfor %}</table></body></html>
""")


def write_page(out_dir: Path, rows: list[Row], conditions: dict[str, Any]) -> tuple[Path, Path]:
    """fidelity.html and fidelity.json in out_dir. conditions: grid, started, load, notes, folders."""
    html = _PAGE.render(rows=rows, conditions=conditions, num=_num, kind=_verdict_kind, interval=_interval_text)
    page, data = out_dir / "fidelity.html", out_dir / "fidelity.json"
    write_atomic(page, html)
    write_atomic(data, json.dumps({"conditions": conditions, "rows": [asdict(r) | {"ok": r.ok} for r in rows]},
                                  indent=1))
    return page, data
