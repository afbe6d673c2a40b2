"""What a server agent runs, for a run's provenance (mixed into ServerAgent): the loader and the sender it would
start, by sha256 on this host; iperf3 and tcpdump by the version they print; every server module loaded now, read
back from the kernel (loaded_objects: each program's tag, not the controller's build tree) among those this
agent holds (another lab instance's loads are its own agent's to report); and the TCP sysctls its namespace's
flows see."""

from __future__ import annotations

from typing import Any

from cellab.errors import CellabError
from cellab.paths import find_program
from cellab.software import program_record, sysctls, which_record

from .loaded_objects import loaded_modules

BUILT_PROGRAMS = ("cellab-modules", "cellab-send")


class ServerProvenance:
    """Mixin for the server agent (provides `netns`)."""

    netns: str | None

    def software_report(self) -> dict[str, Any]:
        programs: dict[str, Any] = {}
        for name in BUILT_PROGRAMS:
            try:
                programs[name] = program_record(find_program(name), version_argv=None)
            except CellabError:
                programs[name] = None  # not built on this host: said, not hidden
        for name, argv in (("iperf3", ("--version",)), ("tcpdump", ("--version",))):
            programs[name] = which_record(name, argv)
        held = sorted(self._sm_state()["loaded"])  # type: ignore[attr-defined]  # ModuleOps's
        return {"programs": programs, "modules": loaded_modules(held), "sysctls": sysctls(self.netns)}
