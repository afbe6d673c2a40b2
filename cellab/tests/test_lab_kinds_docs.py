"""Issue 40: the README, `cellab run --help` and the campaign reference name the same lab kinds, the ones the
`cellab.labs` entry points register (a user read `virtual-android` in one and not in the other)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from cellab.contracts.registry import registered
from cellab.testkit.helpers import run_cellab

ROOT = Path(__file__).resolve().parents[2]


def test_every_lab_kind_is_named_wherever_the_lab_kinds_are_listed():
    kinds = set(registered("cellab.labs"))
    assert {"virtual", "wired", "virtual-android", "srsran-zmq"} <= kinds
    readme = (ROOT / "README.md").read_text()
    labs_list = readme[readme.index("Labs, from cheapest"):readme.index("## Quick start")]
    run_row = next(line for line in readme.splitlines() if line.startswith("| `cellab run CAMPAIGN [--lab"))
    example = next(line for line in readme.splitlines() if line.startswith("lab: virtual "))
    help_text = " ".join(run_cellab("run", "--help", env={**os.environ, "COLUMNS": "400"}).stdout.split())
    for where, text in (("README's lab list", labs_list), ("README's cellab run row", run_row),
                        ("README's campaign example", example), ("cellab run --help", help_text)):
        named = {k for k in kinds if re.search(rf"(?<![\w-]){re.escape(k)}(?![\w-])", text)}
        assert named == kinds, f"{where} names {sorted(named)}, the registered lab kinds are {sorted(kinds)}"
