"""The fidelity bench's virtual side on the real side's own clocks (issue 37).

srsRAN over ZMQ runs at the host's pace (0.3-0.6 of real time on a 2-core host, with swings and stalls), and its
ZMQ broker records when each TTI passed (each run folder's `stack-clock-dl.bin`, cellab.labs.clock). The virtual
cell can run on such a recording (its parameter `clock_file`: TTI k at the recorded time of TTI k,
emulator/README.md "Recorded clock"). So the real campaigns run first, and the virtual repeat i of a case runs on
the clock of the real repeat i of the same case: both labs at the same speed and with the same stalls, whatever
the host, and a slow real side is compared, not left out.

Each real clock is cut LEAD_S before its run's workload started, because the virtual cell's TTI 0 is its start at
configure and its workload begins about that long after: the virtual workload meets the stack speed of the real
workload's own seconds (to within the difference of the two labs' configure-to-workload times; the cell's own
clock of each run, collected as its stack-clock-dl.bin, shows where it was). A virtual repeat whose real repeat
left no usable clock (failed, no file) takes the next real repeat's that did; a case with none runs at real
time, and the page says so.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cellab.errors import CellabError
from cellab.labs.clock import CLOCK_FILES, RECORD_BYTES, StackClock
from cellab.results.store import ResultStore
from cellab.safepath import write_file

if TYPE_CHECKING:
    from cellab.fidelity.cases import CampaignResult, Plan

LEAD_S = 1.0  # the virtual lab's configure-to-workload time (cell start, clock offsets, attenuation): ~0.5-1.5 s
REPEAT_MARK = "_r"  # a virtual level `<case>_r<i>` (case names have no "_"): the case on real repeat i's clock
CLOCK_DIR = "clocks"  # under the bench's output folder: the cut clocks the virtual runs ran on


@dataclass(frozen=True)
class RealClock:
    """One real repeat's clock, cut to its workload (path), or why it has none."""

    repeat: int
    path: Path | None
    speed: float | None = None  # the real run's stack speed over its workload (1.0 = real time)
    why: str | None = None


def case_of(level: str) -> str:
    """The case a level of a campaign's `case` factor measures (a virtual level names the real repeat too)."""
    return level.split(REPEAT_MARK)[0]


def cut_clock(src: Path, from_wall_s: float, dst: Path) -> Path:
    """dst: the clock file src from its last TTI that began by from_wall_s (epoch s) on, its header's first_tti
    moved with it. CellabError (InputError for a bad file) when src has no TTI after from_wall_s."""
    clock = StackClock.from_file(src)  # the whole file checked
    skip = max(0, math.floor(clock.tti_at(from_wall_s) - clock.first_tti - 1))  # record i ends TTI first_tti + i
    if skip >= clock.ttis:
        raise CellabError(f"{src}: the stack clock ends before the workload began ({clock.ttis} TTIs recorded)")
    data = src.read_bytes()
    end = data.index(b"\n")
    header = json.loads(data[:end]) | {"first_tti": clock.first_tti + skip}
    dst.parent.mkdir(parents=True, exist_ok=True)
    write_file(dst.parent, dst.name, json.dumps(header).encode() + b"\n" + data[end + 1 + skip * RECORD_BYTES:],
               durable=False)  # by rename, never through a link
    return dst


def real_clocks(results: list[CampaignResult], out_dir: Path) -> dict[str, list[RealClock]]:
    """Case -> each real repeat's clock in repeat order, cut LEAD_S before its workload into out_dir."""
    clocks: dict[str, list[RealClock]] = {}
    for result in results:
        if result.folder is None:
            continue
        store = ResultStore.open(result.folder)
        for row in sorted(store.rows(), key=lambda r: r["idx"]):
            case = row["factors"].get("case")
            if isinstance(case, str):
                clocks.setdefault(case, []).append(_real_clock(store, row, case, out_dir))
    return clocks


def _real_clock(store: ResultStore, row: dict[str, Any], case: str, out_dir: Path) -> RealClock:
    repeat = int(row["repeat"])
    if row["status"] != "ok":
        return RealClock(repeat, None, why=f"real run {row['status']}")
    src = store.run_dir(row["run_id"]) / CLOCK_FILES["dl"]
    try:
        manifest = store.manifest(row["run_id"])
        t0 = float(manifest["workload_started_at"])
        path = cut_clock(src, t0 - LEAD_S, out_dir / f"{case}-r{repeat}.bin")
    except (CellabError, KeyError, TypeError, ValueError) as exc:
        return RealClock(repeat, None, why=f"{src}: {exc}")
    speed = ((manifest.get("lab_timing") or {}).get("stack_clock") or {}).get("speed")
    return RealClock(repeat, path, speed if isinstance(speed, (int, float)) else None)


def on_real_clocks(plan: Plan, clocks: dict[str, list[RealClock]], repeats: int) -> list[str]:
    """The virtual plan rewritten in place: each campaign's case levels become one level per repeat,
    `<case>_r<i>` with clock_file the real repeat i's clock (the next usable one when it has none), run once each
    (repeat 1); returns notes for the page (cases on the wall clock, repeats on another repeat's clock)."""
    notes = []
    for campaign in plan.campaigns.values():
        levels: dict[str, dict[str, Any]] = {}
        for i in range(repeats):
            for case, level in campaign["factors"]["case"].items():
                usable = [c for c in clocks.get(case, []) if c.path is not None]
                if not usable:
                    levels[f"{case}{REPEAT_MARK}{i}"] = level
                    if i == 0:
                        why = "; ".join(c.why or "" for c in clocks.get(case, [])) or "no real run"
                        notes.append(f"{case}: the virtual cell ran at real time (no real clock: {why})")
                    continue
                clock = next((c for c in usable if c.repeat >= i), usable[i % len(usable)])
                if clock.repeat != i:
                    notes.append(f"{case}: virtual repeat {i} on real repeat {clock.repeat}'s clock")
                levels[f"{case}{REPEAT_MARK}{i}"] = level | {"clock_file": str(clock.path)}
        campaign["factors"]["case"] = levels
        campaign["repeat"] = 1
    return notes
