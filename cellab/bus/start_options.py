"""What an agent says of itself in its hello beside its role: the host it runs on and the host-only options it was
started with (`cellab agent --netns ... --cell-ctl ...`), so a controller that loses it prints the whole command
that starts it again (cellab.run.agent_loss). Both are checked on each side of the wire and only ever printed,
never run: a name from a fixed list, a value of printable characters within a length."""

from __future__ import annotations

import re
from typing import Any

# the `cellab agent` options an inventory cannot know (they are of the agent's host), by their option names
START_OPTIONS = ("kind", "serial", "adb_port", "netns", "cell_ctl", "cell_ue", "srsran_bin", "artifact_dir")
VALUE_MAX_CHARS = 300
_VALUE = re.compile(rf"[^\x00-\x1f\x7f]{{1,{VALUE_MAX_CHARS}}}")
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")


def check_start_options(options: Any) -> dict[str, str]:
    """The options that are a known name with a printable value (others are left out); {} for anything else."""
    if not isinstance(options, dict):
        return {}
    return {key: value for key, value in options.items()
            if key in START_OPTIONS and type(value) is str and _VALUE.fullmatch(value)}


def check_host(host: Any) -> str | None:
    """A host name as an agent says it (letters, digits, '.', '_', '-'); None for anything else."""
    return host if type(host) is str and _HOST.fullmatch(host) else None
