"""The report's "Flagged runs" section: runs whose numbers need a second look (cellab.results.flags: a saturated
host, a partial probe, a stale first telemetry reading), each with what was seen. The same flags are in
results.sqlite's run_flags; the report computes them from the runs' metrics, so an older folder shows them too."""

from __future__ import annotations

from collections import Counter

from cellab.report.model import Run, Section, Table
from cellab.results.flags import HOST_SATURATED_PCT, STALE_JUMP_DB

MEANING = {
    "host-saturated": f"the controller host's CPU was at least {HOST_SATURATED_PCT:g} % busy during the workload: "
                      "the lab may have measured the host, not the model",
    "probe-partial": "the receiver probe reported a partial summary (flows incomplete, read errors): its throughput "
                     "can hold spikes that never crossed the radio",
    "stale-telemetry": f"an agent's first RSRP reading differs from its next by {STALE_JUMP_DB:g} dB or more that "
                       "the attenuation does not explain: it describes the level before the run",
}


def flag_section(runs: list[Run]) -> Section | None:
    flagged = [r for r in runs if r.flags]
    if not flagged:
        return None
    counts = Counter(flag for r in flagged for flag in r.flags)
    section = Section("flags", "Flagged runs", notes=[
        f"{len(flagged)} of {len(runs)} finished run(s) flagged; their numbers stay in every table and plot, "
        "marked: " + "; ".join(f"{flag} ({n}): {MEANING[flag]}" for flag, n in counts.items()) + "."])
    rows = [[str(r.idx), (r.run_id, "left"), (r.scheme, "left"), (flag, "left"), (detail, "left")]
            for r in flagged for flag, detail in r.flags.items()]
    section.tables.append(Table(["#", "run id", "scheme", "flag", "what was seen"], rows))
    return section


__all__ = ["MEANING", "flag_section"]
