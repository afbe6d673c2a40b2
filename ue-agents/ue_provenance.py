"""What a UE agent runs, for a run's provenance: the virtual UE's cellab-probe and iperf3 by sha256 and version;
an Android UE's phone (model, Android, kernel, ABI), the aarch64 probe build it pushes (by sha256 on this host) and,
once pushed, the sha256 the phone itself computes of its copy (toybox `sha256sum`; None when the phone has none)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cellab.errors import CellabError
from cellab.paths import find_program
from cellab.software import program_record, which_record

PROBE_AARCH64 = "cellab-probe-aarch64"  # the static build an Android agent pushes (android/agent.py's too)


def _built(name: str) -> dict[str, Any] | None:
    try:
        return program_record(find_program(name), version_argv=None)
    except CellabError:
        return None  # not built on this host: said, not hidden


class VirtualUEProvenance:
    """Mixin for the virtual UE agent."""

    def software_report(self) -> dict[str, Any]:
        return {"programs": {"cellab-probe": _built("cellab-probe"), "iperf3": which_record("iperf3")}}


class AndroidProvenance:
    """Mixin for the Android UE agent (provides phone, probe_binary, _probe_pushed)."""

    phone: Any
    probe_binary: Path | None
    _probe_pushed: bool

    def software_report(self) -> dict[str, Any]:
        from .android.phone import PROBE_DEVICE_PATH

        probe = (program_record(self.probe_binary, version_argv=None) if self.probe_binary
                 else _built(PROBE_AARCH64))
        on_phone = None
        if self._probe_pushed:
            try:
                said = self.phone.sh("sha256sum", PROBE_DEVICE_PATH, timeout_s=15)
                words = said.stdout.split()
                on_phone = words[0] if said.code == 0 and words and len(words[0]) == 64 else None
            except CellabError:
                on_phone = None
        info = self.phone.info
        return {"phone": {"model": info.model, "manufacturer": info.manufacturer, "android": info.android,
                          "sdk": info.sdk, "kernel": info.kernel, "abi": info.abi},
                "programs": {"cellab-probe-aarch64": probe}, "probe_on_phone_sha256": on_phone}
