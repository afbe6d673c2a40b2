"""`make bench BENCH=fidelity`: the virtual cell against srsRAN over ZMQ, the same cases on both labs (the real
ones first, each virtual repeat on the real repeat's own stack clock: cellab.fidelity.clocks), printed as a table with tolerances and written as runs/out/fidelity/fidelity.html (+ .json) next to the
campaigns' result folders (each with its normal report).

    make bench BENCH=fidelity                          # the full grid (about 22 min)
    CELLAB_FIDELITY_GRID=quick make bench BENCH=fidelity   # 25 PRB, SR 20, Cubic, SNR 30/10 dB, two UEs, recovery
    python -m cellab.fidelity.bench --quick [--out DIR] [--cases 'recovery-*']   # the cases matching a glob

Needs root and the srsRAN bundle (../shared/tools/srsran or $CELLAB_SRSRAN_BIN); says so and returns otherwise.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

from cellab.fidelity import cases as fidelity
from cellab.fidelity.clocks import CLOCK_DIR, on_real_clocks, real_clocks
from cellab.errors import CellabError
from cellab.paths import RUNS_OUT

GRID_ENV = "CELLAB_FIDELITY_GRID"
OUT_DIR = RUNS_OUT / "fidelity"


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} CPUs)"


def srsran_missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, TUN devices)"
    try:
        from cellab.labs import embedded_lab_class

        lab = embedded_lab_class(fidelity.REAL_LAB)()
        lab.bin_dir  # noqa: B018  (the srsRAN programs, or the error listing where it looked)
    except CellabError as exc:
        return str(exc)
    return None


def only_cases(plan: fidelity.Plan, pattern: str) -> fidelity.Plan:
    """The plan with the cases matching a glob (a campaign left without one is dropped)."""
    for kind, campaign in list(plan.campaigns.items()):
        levels = {case: level for case, level in campaign["factors"]["case"].items()
                  if fnmatch.fnmatchcase(case, pattern)}
        if levels:
            campaign["factors"]["case"] = levels
        else:
            del plan.campaigns[kind]
    plan.missing_cases = {c: why for c, why in plan.missing_cases.items() if fnmatch.fnmatchcase(c, pattern)}
    return plan


def run(grid_name: str, out_dir: Path, cases: str = "*", grid: fidelity.Grid | None = None) -> list[fidelity.Row]:
    """Each lab's campaigns of the grid's cases matching `cases`: the real ones first, then the virtual ones, each
    virtual repeat on the stack clock of the real repeat with its index (cellab.fidelity.clocks); the table."""
    grid = grid or fidelity.GRIDS[grid_name]
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load_start = _load()
    results: dict[str, list[fidelity.CampaignResult]] = {}
    missing: dict[str, str] = {}
    notes: list[str] = []
    for lab, prefix in ((fidelity.REAL_LAB, "fdr"), (fidelity.VIRTUAL_LAB, "fdv")):
        plan = only_cases(fidelity.build_plan(lab, grid), cases)
        notes += [f"{lab}: {why}" for why in plan.omitted_params.values()]
        missing |= plan.missing_cases
        if lab == fidelity.VIRTUAL_LAB:
            notes += _on_real_clocks(plan, results[fidelity.REAL_LAB], out_dir, grid.repeats)
        t0 = time.monotonic()
        done = fidelity.run_plan(plan, out_dir, prefix)
        print(f"{lab}: {len(done)} campaign(s) in {time.monotonic() - t0:.0f} s: "
              + ", ".join(str(r.folder.name) if r.folder else f"FAILED {r.error}" for r in done), flush=True)
        notes += [f"{lab} {r.kind} campaign: {r.error}" for r in done if r.error]
        results[lab] = done
    conditions = {"grid": grid_name, "grid_spec": asdict(grid), "cases": cases, "started": started,
                  "load": f"start {load_start}, end {_load()}", "notes": notes,
                  "folders": [r.folder.name for rs in results.values() for r in rs if r.folder],
                  "virtual_only": fidelity.VIRTUAL_ONLY, "shared": fidelity.SHARED}
    return _table(out_dir, [results[fidelity.VIRTUAL_LAB], results[fidelity.REAL_LAB]], missing, conditions, grid)


def _on_real_clocks(plan: fidelity.Plan, real: list[fidelity.CampaignResult], out_dir: Path,
                    repeats: int) -> list[str]:
    """The virtual plan put on the real runs' stack clocks (cut into out_dir/clocks); notes for the page."""
    clocks = real_clocks(real, out_dir / CLOCK_DIR / time.strftime("%Y%m%d-%H%M%S"))
    speeds = sorted(c.speed for cs in clocks.values() for c in cs if c.speed is not None)
    usable = sum(1 for cs in clocks.values() for c in cs if c.path is not None)
    summary = (f"the virtual repeats ran on {usable} real run(s)' stack clocks"
               + (f" (real stack speed {speeds[0]:.2f}-{speeds[-1]:.2f} of real time)" if speeds else ""))
    print(summary, flush=True)
    return [summary] + on_real_clocks(plan, clocks, repeats)


def _table(out_dir: Path, results: list[list[fidelity.CampaignResult]], missing: dict[str, str],
           conditions: dict, grid: fidelity.Grid) -> list[fidelity.Row]:
    virtual, real = (fidelity.read_results(r) for r in results)
    names = [case for case in fidelity.case_names(grid)
             if fnmatch.fnmatchcase(case, conditions.get("cases", "*"))]
    rows = fidelity.fidelity_rows(names, real, virtual, missing)
    page, _ = fidelity.write_page(out_dir, rows, conditions)
    for note in conditions["notes"]:
        print(f"note: {note}")
    print(fidelity.format_table(rows))
    print(f"load average: {conditions['load']}")
    print(f"page: {page}")
    return rows


def reread(out_dir: Path) -> list[fidelity.Row] | None:
    """The table again from the campaign folders of the last run (its fidelity.json), with today's readers,
    tolerances and known deviations: no run."""
    source = out_dir / "fidelity.json"
    try:
        conditions = json.loads(source.read_text())["conditions"]
        grid = _grid_of(conditions)
        folders = [out_dir / name for name in conditions["folders"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"fidelity: {source}: no earlier run to read ({type(exc).__name__}: {exc})")
        return None
    results, missing = [], {}
    for lab in (fidelity.VIRTUAL_LAB, fidelity.REAL_LAB):
        missing |= only_cases(fidelity.build_plan(lab, grid), conditions.get("cases", "*")).missing_cases
        results.append([fidelity.CampaignResult(lab, kind, folder) for folder in folders
                        for kind in fidelity.CAMPAIGN_KINDS if folder.name.startswith(f"fidelity-{kind}-{lab}-")])
    return _table(out_dir, results, missing, conditions, grid)


def _grid_of(conditions: dict) -> fidelity.Grid:
    """The grid a run used: its spec (a command-line case's own grid) or its name."""
    spec = conditions.get("grid_spec")
    if not isinstance(spec, dict):
        return fidelity.GRIDS[conditions["grid"]]
    return fidelity.Grid(**{k: tuple(v) if isinstance(v, list) else v for k, v in spec.items()})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m cellab.fidelity.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the reduced grid (also CELLAB_FIDELITY_GRID=quick)")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help=f"output folder (default {OUT_DIR})")
    parser.add_argument("--cases", default="*", help="only the cases matching this glob (e.g. 'recovery-*')")
    parser.add_argument("--reread", action="store_true",
                        help="the table again from the last run's campaign folders (no run)")
    args = parser.parse_args(argv or [])
    if args.reread:
        reread(args.out)
        return
    grid_name = "quick" if args.quick else os.environ.get(GRID_ENV, "full")
    if grid_name not in ("full", "quick"):
        print(f"fidelity: {GRID_ENV}={grid_name!r} is not a grid (allowed: full, quick)")
        return
    why = srsran_missing()
    if why:
        print(f"fidelity: skipped: {why}")
        return
    run(grid_name, args.out, args.cases)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
