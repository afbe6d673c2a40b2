"""Profile -> the four files srsenb reads: enb.conf (INI), rr.conf, sib.conf, rb.conf (libconfig)."""

from __future__ import annotations

from pathlib import Path

import jinja2

from cellab.ran.profile import EnbProfile
from cellab.ran.uhd_args import device_args as uhd_device_args
from cellab.ran.uhd_args import uses_lte_rates

FILES = {"enb": "enb.conf", "rr": "rr.conf", "sib": "sib.conf", "rb": "rb.conf"}
TEMPLATES = Path(__file__).parent / "templates"
# ZMQ ports of cell i > 0 (its own RF channel): the profile's ports plus this step times i
ZMQ_PORT_STEP = 100


def _num(value: float) -> str:
    return f"{value:g}"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=False, autoescape=False)
    env.filters["num"] = _num
    env.filters["bool"] = _bool
    return env


def _shift_port(endpoint: str, step: int) -> str:
    head, _, port = endpoint.rpartition(":")
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
    return {**{k: getattr(profile, k) for k in type(profile).model_fields}, "profile_name": profile_name or profile.name,
            "enb_id_hex": f"0x{profile.enb.enb_id:X}", "device_name": name, "device_args": args,
            "lte_sample_rates": lte_rates, "files": FILES}


def render_texts(profile: EnbProfile, profile_name: str = "") -> dict[str, str]:
    """file name -> text."""
    env, ctx = _env(), context(profile, profile_name)
    return {fname: env.get_template(f"{fname}.j2").render(ctx) for fname in FILES.values()}


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
