"""How a run's scheme is named, shared by the report and the DataFrames (cellab.results.frames): one rule, so a
notebook's `scheme` column and the report's tables agree."""

from __future__ import annotations

from typing import Any


def scheme_label(cc: Any, receiver: Any) -> str:
    """`cubic`, or `cubic+exll-rx` with receiver-side control; no receiver (or "none") is just the cc."""
    label = str(cc) if cc not in (None, "") else "default"
    if receiver in (None, "", "none"):
        return label
    receiver = str(receiver)
    return f"{label}+{receiver if receiver.endswith('-rx') else receiver + '-rx'}"


__all__ = ["scheme_label"]
