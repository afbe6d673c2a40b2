"""The report's cluster section: benches the cluster retired (quarantine: why and when) and runs it held back
because a run in flight on the same host had another value of a host-scoped module parameter. Read from the
campaign folder's cluster-events.json (cellab.results.cluster_events); absent when nothing of the kind happened."""

from __future__ import annotations

import time
from pathlib import Path

from cellab.report.model import Section, Table
from cellab.results.cluster_events import read_events


def _utc(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def cluster_section(root: Path) -> Section | None:
    events, problem = read_events(root)
    retired = [e for e in events if e["kind"] == "retired"]
    held = [e for e in events if e["kind"] == "serialized"]
    if not retired and not held and problem is None:
        return None
    section = Section("cluster", "Cluster: retired benches, serialized runs")
    if problem:
        section.notes.append(f"Cluster events partly unreadable: {problem}.")
    if retired:
        section.notes.append(
            "A bench worker leaves the pool after a failed health check or two failed runs in a row (its queued runs "
            "go to the other workers; runs only it could serve end aborted, and `cellab run --resume` runs them once "
            "it is back). Embedded lab slots are never retired, and invalid runs (the host lost real time) never "
            "count against a bench.")
        section.tables.append(Table(["bench worker", "inventory", "reason", "when", "with run"],
                                    [[e["worker"], e["bench"], e["reason"], _utc(e["at"]), e["run_id"]]
                                     for e in retired], caption="Retired benches"))
    if held:
        section.notes.append(
            f"{len({e['run_id'] for e in held})} run(s) were held back from a host while a run there had another value "
            "of a host-scoped module parameter (one value per host: it cannot be set per network namespace), so "
            "such runs were serialized on that host rather than run at once.")
        section.tables.append(Table(["run", "host", "parameter", "its value", "value in flight", "when"],
                                    [[e["run_id"], e["host"], e["param"], e["value"], e["other"], _utc(e["at"])]
                                     for e in held], caption="Runs serialized for a host-scoped parameter"))
    return section
