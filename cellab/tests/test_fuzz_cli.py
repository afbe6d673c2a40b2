"""The command line, fuzzed (issue 27): each command that reads files or takes numbers, from an argv that works,
with one argument or option replaced by a hostile value (NUL, over-long, NaN, infinite, zero, negative, beyond 64
bits, a folder, a FIFO, a symlink loop, /dev/zero, a line break with a [section]). Every outcome is an exit code
of 0, 1 or 2 with a message, within seconds: no traceback (an exception other than the CLI's own errors), no hang.

In process (typer's runner), the rooms' commands mounted: the server-like commands (agents, workers, emulators,
lab bring-up, BPF loading) are left to their own bad-input tests, as they would start something on a good value;
so are the database commands (each try leaves a MongoDB client's monitor threads in the test process).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cellab.errors import CellabError

pytestmark = pytest.mark.background  # no clock, no root: beside a lab test at SCHED_IDLE (conftest.py)

ROOT = Path(__file__).resolve().parents[2]
CLI_FUZZ = settings(max_examples=25, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
HANG_S = 60  # a hang never ends; a slow host must not pass for one


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """Good inputs to start from, and hostile paths (a FIFO, a symlink loop) in a folder of their own."""
    tmp = tmp_path_factory.mktemp("cli")
    (tmp / "cal.json").write_text(json.dumps({
        "shield_box": "b", "ue": "u", "earfcn": 1, "a_dbm": -45, "b_db_per_db": 1, "residual_rms_db": 0,
        "max_residual_db": 0, "min_db": 0, "max_db": 95}))
    (tmp / "drive.csv").write_text("t_s,rsrp_dbm\n0,-80\n1,-90\n2,-95.5\n")
    (tmp / "atten.yaml").write_text(yaml.safe_dump({"attenuators": [{
        "name": "box1", "model": "minicircuits-rcdat", "transport": "http", "address": "http://127.0.0.1:9",
        "channels": 4, "max_db": 95}]}))
    os.mkfifo(tmp / "fifo")
    (tmp / "loop").symlink_to(tmp / "loop")
    return {"tmp": str(tmp), "campaign": str(ROOT / "runs/demo/sr-validation.yaml"),
            "core": str(ROOT / "core-config/examples/srsran-zmq.yaml"),
            "enb": str(ROOT / "ran-config/examples/zmq-25prb.yaml"),
            "schedule": str(ROOT / "runs/schedules/pedestrian.yaml"),
            "subscribers": str(ROOT / "core-config/examples/subscribers.csv"),
            "cal": str(tmp / "cal.json"), "drive": str(tmp / "drive.csv"), "atten": str(tmp / "atten.yaml"),
            "fifo": str(tmp / "fifo"), "loop": str(tmp / "loop")}


# argv templates that work (or fail cleanly: no device at the address); {out} is a fresh path per call
COMMANDS = {
    "validate": ["validate", "{campaign}"],
    "plan": ["plan", "{campaign}", "--lab", "virtual"],
    "schema": ["schema", "--out", "{out}"],
    "core render": ["core", "render", "{core}", "--flavour", "srsepc", "--out", "{out}"],
    "core identity": ["core", "identity", "{core}"],
    "ran check": ["ran", "check", "{enb}", "--core", "{core}"],
    "ran render": ["ran", "render", "{enb}", "--out", "{out}"],
    "atten check": ["atten", "check", "{schedule}", "--config", "{atten}"],
    "atten replay": ["atten", "replay", "{drive}", "--calibration", "{cal}", "--out", "{out}", "--min-db", "10",
                     "--max-db", "95", "--step-db", "0.5", "--smoothing-s", "1", "--channel", "1"],
    "atten get": ["atten", "get", "{atten}", "1", "--name", "box1"],
    "trace samples": ["trace", "samples", "{out}"],
    "vlab status": ["vlab", "status", "--prefix", "czf9"],
}

# inputs: anything readable or not; outputs: only places inside the test's folder (a fuzzer writes there)
hostile_inputs = st.sampled_from(["", "\x00", "a\x00b", "x" * 5000, ("d/" * 600) + "f", "/", "/dev/zero", "/dev/null",
                                  "/dev/urandom", "{fifo}", "{loop}", "{tmp}", "{loop}/x", "/nonexistent/dir/f", "-",
                                  "..", "\n[hss]\ndb_file = /etc/shadow"])
hostile_outputs = st.sampled_from(["", "\x00", "{tmp}/a\x00b", "{tmp}/" + "x" * 300, "{tmp}/" + "d/" * 2100 + "f",
                                   "{fifo}", "{loop}", "{loop}/x", "{tmp}", "{tmp}/", "{tmp}/.", "{tmp}/..",
                                   "{cal}", "{cal}/x", "{tmp}/new/deeper/f", "{tmp}/\n[x]"])
hostile_numbers = st.sampled_from(["nan", "NaN", "inf", "-inf", "0", "-0", "-1", "1e400", "-1e400", "1e-320",
                                   "18446744073709551617", "-9223372036854775809", "0x10", "١", " 5 ", "5,5", "",
                                   "1__0", "3.", ".", "e5"])  # not "1_000": a valid 1000 s wait
hostile_text = st.one_of(st.sampled_from(["", "\x00", "\u200b", "\u202e", "x" * 5000, "a b", "[x]", "-1",
                                          "--help", "mongodb://", "tcp://", "ipc://", ":", "czf9\n"]),
                         st.text(max_size=20))


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


class _Hang(Exception):
    pass


def _raise_hang(*_: object) -> None:
    raise _Hang()


def _run(argv: list[str], cwd: str):
    """In cwd (the test's folder: a relative path a command takes as its output lands there)."""
    from cellab import cli

    old, here = signal.signal(signal.SIGALRM, _raise_hang), os.getcwd()
    os.chdir(cwd)
    signal.alarm(HANG_S)
    try:
        return CliRunner().invoke(cli.app, argv, catch_exceptions=True)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        os.chdir(here)


@pytest.mark.parametrize("command", list(COMMANDS))
@CLI_FUZZ
@given(pick=st.integers(min_value=1, max_value=30), inputs=hostile_inputs, outputs=hostile_outputs,
       numbers=hostile_numbers, text=hostile_text, seq=st.integers(0, 10**9))
def test_a_command_with_one_hostile_value_ends_cleanly(files, command, pick, inputs, outputs, numbers, text, seq):
    out = str(Path(files["tmp"]) / f"out-{seq}")
    argv = [a.format(**files, out=out) for a in COMMANDS[command]]
    words = len(command.split())
    slots = list(range(words, len(argv)))
    index = slots[pick % len(slots)]
    if argv[index].startswith("--"):  # a flag: replace its value instead
        index = min(index + 1, len(argv) - 1)
    current, template = argv[index], COMMANDS[command][index]
    value = (outputs if template == "{out}" else numbers if _is_number(current) else
             inputs if "/" in current else text)
    for name, path in files.items():  # the placeholders only: a generated text may hold braces of its own
        value = value.replace("{" + name + "}", path)
    argv[index] = value
    result = _run(argv, files["tmp"])
    shown = f"cellab {' '.join(a[:60] for a in argv)!r}"
    assert not isinstance(result.exception, _Hang), f"{shown}: no end within {HANG_S} s"
    if result.exception is not None and not isinstance(result.exception, (SystemExit, CellabError)):
        raise AssertionError(f"{shown}: {type(result.exception).__name__}: {result.exception}") from result.exception
    assert result.exit_code in (0, 1, 2), (shown, result.exit_code, result.output[-500:])
    assert "Traceback" not in result.output, (shown, result.output[-1500:])
    if result.exit_code == 2 and not isinstance(result.exception, CellabError):
        assert result.output.strip(), f"{shown}: exit 2 without a word"
