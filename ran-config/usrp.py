"""USRP discovery and health through UHD's command-line tools (Debian package uhd-host):
`uhd_find_devices` (one "Device Address:" block of `key: value` lines per device) and `uhd_usrp_probe
--args serial=...` (an indented `|   ` tree: Mboard, FW/FPGA versions, daughterboards, clock and time sources).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field

import yaml

from cellab.errors import CellabError

_FAMILY = {"b200": "b2xx", "x300": "x3xx", "n3xx": "n3xx", "mpmd": "n3xx"}
_KV = re.compile(r"^[|\s]*([A-Za-z][A-Za-z0-9 /_-]*?):\s*(.*)$")


@dataclass
class UsrpDevice:
    address: dict[str, str]
    probe: dict[str, object] = field(default_factory=dict)
    health: str = "not probed"

    @property
    def serial(self) -> str:
        return self.address.get("serial", "")

    @property
    def product(self) -> str:
        return self.address.get("product", "") or self.address.get("type", "")

    @property
    def family(self) -> str | None:
        return _FAMILY.get(self.address.get("type", ""))

    def device_args(self) -> str:
        args = [f"type={self.address['type']}"] if "type" in self.address else []
        if self.serial:
            args.append(f"serial={self.serial}")
        if "addr" in self.address:
            args.append(f"addr={self.address['addr']}")
        return ",".join(args)


def parse_find_devices(text: str) -> list[UsrpDevice]:
    """Each `Device Address:` block's `key: value` lines (ends at a blank line or the next `--` rule)."""
    devices: list[UsrpDevice] = []
    current: dict[str, str] | None = None
    for line in text.splitlines():
        if line.strip() == "Device Address:":
            current = {}
            devices.append(UsrpDevice(current))
            continue
        if current is None:
            continue
        if not line.strip() or line.startswith("--"):
            current = None
            continue
        key, sep, value = line.strip().partition(":")
        if sep:
            current[key.strip()] = value.strip()
    return devices


def parse_probe(text: str) -> dict[str, object]:
    """The motherboard's name, serial, versions, clock/time sources and daughterboard names of a probe tree;
    `errors`: UHD's error lines."""
    out: dict[str, object] = {"daughterboards": [], "errors": []}
    for line in text.splitlines():
        bare = re.sub(r"^[|\s/]*", "", line).strip()
        if re.match(r"^(Error|RuntimeError|LookupError|\[ERROR\])", bare):
            out["errors"].append(bare)  # type: ignore[union-attr]
            continue
        m = re.match(r"^(Mboard|RX Dboard|TX Dboard):\s*(.*)$", bare)
        if m:
            if m.group(1) == "Mboard":
                out.setdefault("mboard", m.group(2))
            else:
                out["daughterboards"].append(f"{m.group(1)} {m.group(2)}")  # type: ignore[union-attr]
            continue
        kv = _KV.match(bare)
        if kv:
            key, value = kv.group(1).strip().lower(), kv.group(2).strip()
            if key in ("serial", "fw version", "fpga version", "name", "revision", "product") and key not in out:
                out[key] = value
            elif key in ("time sources", "clock sources") and key not in out:
                out[key] = [s.strip() for s in value.split(",") if s.strip()]
    return out


def _run(argv: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    if shutil.which(argv[0]) is None:
        raise CellabError(f"{argv[0]} not found: install Debian's uhd-host (make setup does)")
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise CellabError(f"{argv[0]} did not answer within {timeout_s:g} s") from None


def discover(probe: bool = True, timeout_s: float = 30.0) -> list[UsrpDevice]:
    found = _run(["uhd_find_devices"], timeout_s)
    devices = parse_find_devices(found.stdout)
    for dev in devices if probe else []:
        result = _run(["uhd_usrp_probe", "--args", dev.device_args()], timeout_s)
        dev.probe = parse_probe(result.stdout + "\n" + result.stderr)
        errors = dev.probe.get("errors") or []
        dev.health = "ok" if result.returncode == 0 and not errors else (
            f"probe failed: {errors[0] if errors else f'exit code {result.returncode}'}")
    return devices


def inventory_snippet(devices: list[UsrpDevice], agent: str = "enb1") -> str:
    """`devices: enb:` entries of a lab inventory for these USRPs (EnbEntry fields), health as comments."""
    entries = []
    comments = []
    for i, dev in enumerate(devices):
        name = f"enb-{(dev.product or 'usrp').lower()}-{(dev.serial or str(i)).lower()}"
        entries.append({"name": name, "kind": "srsran", "rf": "uhd", "device_args": dev.device_args(), "agent": agent})
        comments.append(f"# {name}: {dev.product} serial {dev.serial or '?'} family {dev.family or '?'}, {dev.health}")
    return "\n".join(comments) + "\n" + yaml.safe_dump({"devices": {"enb": entries}}, sort_keys=False)


def doctor_check(timeout_s: float = 10.0) -> tuple[str, str]:
    """(status, detail) for `cellab doctor`: ok / none (no USRP) / missing (no uhd-host) / warn (a probe failed)."""
    try:
        devices = discover(probe=True, timeout_s=timeout_s)
    except CellabError as exc:
        return ("missing", str(exc)) if "not found" in str(exc) else ("warn", str(exc))
    if not devices:
        return "none", "no USRP attached (uhd_find_devices)"
    bad = [d for d in devices if d.health != "ok"]
    detail = "; ".join(f"{d.product} {d.serial}: {d.health}" for d in devices)
    return ("warn" if bad else "ok"), detail
