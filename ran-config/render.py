"""Profile -> the four files srsenb reads: enb.conf (INI), rr.conf, sib.conf, rb.conf (libconfig).

What reaches a file is checked on the way (`_checked`, the environment's finalize): the profile's grammar
refuses bad values first, and the renderer refuses (InputError naming the file, the field and the allowed
form) any string a file cannot carry: boost's INI reader starts a new key or [section] at a line break, cuts a
value at '#', strips blanks; libconfig strings end at '"'; device_args splits at ','. The profile name in
each file's first comment line is escaped instead (anything but printable ASCII becomes '?')."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import jinja2
from cellab.ran.uhd_args import device_args as uhd_device_args
from cellab.ran.uhd_args import uses_lte_rates

from cellab.errors import InputError
from cellab.inputs import text_problem

if TYPE_CHECKING:  # annotations only: the profile's loader applies these rules (no import circle)
    from cellab.ran.profile import EnbProfile

FILES = {"enb": "enb.conf", "rr": "rr.conf", "sib": "sib.conf", "rb": "rb.conf"}
TEMPLATES = Path(__file__).parent / "templates"
# ZMQ ports of cell i > 0 (its own RF channel): the profile's ports plus this step times i
ZMQ_PORT_STEP = 100


def _num(value: float) -> str:
    return f"{value:g}"


def _bool(value: bool) -> str:
    return "true" if value else "false"


# per file: the characters its syntax reads (besides line breaks and anything not printable ASCII)
SPECIAL = {"enb.conf": "#", "rr.conf": '"\\;', "sib.conf": '"\\;', "rb.conf": '"\\;'}
DEVICE_ARGS_SPECIAL = "#, "  # one KEY=VALUE of device_args: ',' separates them
VALUE_FORM = "printable ASCII on one line"


def _refuse(file: str, field: str, problem: str, special: str) -> InputError:
    return InputError(file, field, f"the value {problem}: it cannot be written into {file}",
                      [VALUE_FORM + (f", without {' '.join(special)}" if special else "")])


def _finalize(file: str):
    """Every {{ value }} of a template passes here: the last guard, for a value no field check covered."""
    def check(value: object) -> object:
        if isinstance(value, str):
            problem = text_problem(value, SPECIAL[file], edges=False)
            if problem:
                raise _refuse(file, "a rendered value", problem, SPECIAL[file])
        return value
    return check


def _env(file: str = "enb.conf") -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=False, autoescape=False,
                             finalize=_finalize(file))
    env.filters["num"] = _num
    env.filters["bool"] = _bool
    return env


def comment_text(text: str) -> str:
    """Text for a comment line: anything but printable ASCII (a line break above all), and the characters the
    files' syntax reads, become '?'."""
    return "".join(ch if " " <= ch <= "~" and ch not in '"\\;#' else "?" for ch in text)[:200]


def _strings(value: object, path: str):
    """(field path, string) of every string in a dumped profile."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}[{i}]")
    elif isinstance(value, str):
        yield path, value


def _checked(profile: EnbProfile, device_args: str) -> None:
    """Every string field of the profile against enb.conf's INI syntax (the file its strings reach), and each
    KEY=VALUE of device_args against the comma-separated list it is part of."""
    for field, value in _strings(profile.model_dump(), ""):
        special = DEVICE_ARGS_SPECIAL if field.startswith("rf.device.") else SPECIAL["enb.conf"]
        problem = text_problem(value, special)
        if problem:
            raise _refuse("enb.conf", field, problem, special)
    for pair in device_args.split(","):
        key, eq, val = pair.partition("=")
        problem = text_problem(pair, "# ") or (None if eq and key and val else "is not KEY=VALUE")
        if problem:
            raise _refuse("enb.conf", "rf.device_args", problem, DEVICE_ARGS_SPECIAL)


def _shift_port(endpoint: str, step: int) -> str:
    head, _, port = endpoint.rpartition(":")
    if not port.isascii() or not port.isdigit():
        raise InputError("enb.conf", "rf.device", "a ZMQ endpoint's port is not ASCII digits", ["tcp://HOST:PORT"])
    return f"{head}:{int(port) + step}"


def zmq_device_args(profile: EnbProfile) -> str:
    dev = profile.rf.device
    args = [f"fail_on_disconnect={_bool(dev.fail_on_disconnect)}"]
    if len(profile.cells) == 1:
        args += [f"tx_port={dev.tx_port}", f"rx_port={dev.rx_port}"]
    else:  # one ZMQ channel per cell: tx_port0, rx_port0, tx_port1, ...
        for i in range(len(profile.cells)):
            args += [f"tx_port{i}={_shift_port(dev.tx_port, i * ZMQ_PORT_STEP)}",
                     f"rx_port{i}={_shift_port(dev.rx_port, i * ZMQ_PORT_STEP)}"]
    args += [f"id={dev.id}", f"base_srate={dev.base_srate_hz / 1e6:g}e6"]
    return ",".join(args)


def context(profile: EnbProfile, profile_name: str = "") -> dict:
    dev = profile.rf.device
    if dev.kind == "zmq":
        name, args, lte_rates = "zmq", zmq_device_args(profile), False
    else:
        name, args, lte_rates = "UHD", uhd_device_args(dev, profile.enb.n_prb), uses_lte_rates(dev.family)
    _checked(profile, args)
    return {**{k: getattr(profile, k) for k in type(profile).model_fields},
            "profile_name": comment_text(profile_name or profile.name),
            "enb_id_hex": f"0x{profile.enb.enb_id:X}", "device_name": name, "device_args": args,
            "lte_sample_rates": lte_rates, "files": FILES}


def render_texts(profile: EnbProfile, profile_name: str = "") -> dict[str, str]:
    """file name -> text; InputError when a value cannot be written (nothing is written then)."""
    ctx = context(profile, profile_name)
    return {fname: _env(fname).get_template(f"{fname}.j2").render(ctx) for fname in FILES.values()}


def render(profile: EnbProfile, out_dir: Path, profile_name: str = "") -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for fname, text in render_texts(profile, profile_name).items():
        path = out_dir / fname
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
        written.append(path)
    return written
