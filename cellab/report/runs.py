"""A result folder's runs as the report reads them (cellab.report.model.Run): metrics cleaned, the scheme named,
flags attached. Light on imports: `cellab run` ends with the headline, which reads them too."""

from __future__ import annotations

from typing import Any

from cellab.report.model import Run, clean_metrics, setting
from cellab.results.flags import run_flags
from cellab.results.labels import scheme_label
from cellab.results.store_check import Folder


def load_runs(folder: Folder) -> list[Run]:
    fixed = folder.campaign.get("fixed") or {}
    ue_metrics: dict[str, dict[str, Any]] = {}
    for ue_row in folder.ue_runs:
        ue_metrics.setdefault(ue_row.run_id, {})[ue_row.ue] = ue_row.metrics or {}
    runs = []
    for row in folder.runs:
        metrics, problems = clean_metrics(row.metrics or {})
        cc = setting("cc", row.factors, fixed) or metrics.get("congestion_control")
        scheme = row.factors.get("scheme")
        runs.append(Run(idx=row.idx, run_id=row.run_id, repeat=row.repeat, status=row.status, error=row.error,
                        factors=row.factors, metrics=metrics, params=row.params, unreadable=row.unreadable,
                        problems=problems, scheme=str(scheme) if scheme is not None else
                        scheme_label(cc, setting("receiver", row.factors, fixed)),
                        flags=run_flags(metrics, ue_metrics.get(row.run_id)) if row.status == "ok" else {}))
    return runs
