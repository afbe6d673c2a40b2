"""`make bench BENCH=fidelity`: the virtual cell against srsRAN over ZMQ, the same cases on both labs back to
back, printed as a table with tolerances and written as runs/out/fidelity/fidelity.html (+ .json) next to the
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
from pathlib import Path

from cellab.fidelity import cases as fidelity
from cellab.errors import CellabError
from cellab.paths import RUNS_OUT

GRID_ENV = "CELLAB_FIDELITY_GRID"
OUT_DIR = RUNS_OUT / "fidelity"


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} CPUs)"


def _srsran_missing() -> str | None:
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


def run(grid_name: str, out_dir: Path, cases: str = "*") -> list[fidelity.Row]:
    grid = fidelity.GRIDS[grid_name]
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load_start = _load()
    results, missing, notes = [], {}, []
    for lab, prefix in ((fidelity.VIRTUAL_LAB, "fdv"), (fidelity.REAL_LAB, "fdr")):
        plan = only_cases(fidelity.build_plan(lab, grid), cases)
        notes += [f"{lab}: {why}" for why in plan.omitted_params.values()]
        missing |= plan.missing_cases
        t0 = time.monotonic()
        done = fidelity.run_plan(plan, out_dir, prefix)
        print(f"{lab}: {len(done)} campaign(s) in {time.monotonic() - t0:.0f} s: "
              + ", ".join(str(r.folder.name) if r.folder else f"FAILED {r.error}" for r in done), flush=True)
        for r in done:
            if r.error:
                notes.append(f"{lab} {r.kind} campaign: {r.error}")
        results.append(done)
    conditions = {"grid": grid_name, "cases": cases, "started": started, "load": f"start {load_start}, end {_load()}",
                  "notes": notes, "folders": [r.folder.name for rs in results for r in rs if r.folder],
                  "virtual_only": fidelity.VIRTUAL_ONLY, "shared": fidelity.SHARED}
    return _table(out_dir, results, missing, conditions)


def _table(out_dir: Path, results: list[list[fidelity.CampaignResult]], missing: dict[str, str],
           conditions: dict) -> list[fidelity.Row]:
    virtual, real = (fidelity.read_results(r) for r in results)
    names = [case for case in fidelity.case_names(fidelity.GRIDS[conditions["grid"]])
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
        grid = fidelity.GRIDS[conditions["grid"]]
        folders = [out_dir / name for name in conditions["folders"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"fidelity: {source}: no earlier run to read ({type(exc).__name__}: {exc})")
        return None
    results, missing = [], {}
    for lab in (fidelity.VIRTUAL_LAB, fidelity.REAL_LAB):
        missing |= only_cases(fidelity.build_plan(lab, grid), conditions.get("cases", "*")).missing_cases
        results.append([fidelity.CampaignResult(lab, kind, folder) for folder in folders
                        for kind in fidelity.CAMPAIGN_KINDS if folder.name.startswith(f"fidelity-{kind}-{lab}-")])
    return _table(out_dir, results, missing, conditions)


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
    why = _srsran_missing()
    if why:
        print(f"fidelity: skipped: {why}")
        return
    run(grid_name, args.out, args.cases)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
