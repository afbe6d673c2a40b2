"""UHD device arguments per USRP family and carrier width, as srsENB passes them to UHD.

Facts (anchors.md §1.1, srsRAN rf_uhd_imp): srsRAN reads `clock=external|gpsdo` itself; UHD defaults for
srsENB are recv/send_frame_size=9232; B2xx wants num_recv_frames/num_send_frames=64 and, below 25 PRB,
512-byte frames; a 75-PRB B2xx needs master_clock_rate=15.36e6.
"""

from __future__ import annotations

# srsENB's sample rate per n_prb with [expert] lte_sample_rates = false (its default): 1.92 MHz * k
SAMPLE_RATE_HZ = {6: 1.92e6, 15: 3.84e6, 25: 5.76e6, 50: 11.52e6, 75: 15.36e6, 100: 23.04e6}
# with lte_sample_rates = true (the N3xx's 122.88 MHz clock divides these)
LTE_SAMPLE_RATE_HZ = {6: 1.92e6, 15: 3.84e6, 25: 7.68e6, 50: 15.36e6, 75: 23.04e6, 100: 30.72e6}

_CLOCKS_HZ = {
    "b2xx": (23.04e6, 15.36e6),
    "x3xx": (184.32e6,),
    "n3xx": (122.88e6,),
}
_TYPE = {"b2xx": "b200", "x3xx": "x300", "n3xx": "n3xx"}


def uses_lte_rates(family: str) -> bool:
    return family == "n3xx"


def sample_rate_hz(family: str | None, n_prb: int) -> float:
    return (LTE_SAMPLE_RATE_HZ if family and uses_lte_rates(family) else SAMPLE_RATE_HZ)[n_prb]


def master_clock_hz(family: str, n_prb: int) -> float | None:
    """The first master clock of the family that is an integer multiple of the sample rate, or None."""
    rate = sample_rate_hz(family, n_prb)
    for clock in _CLOCKS_HZ[family]:
        ratio = clock / rate
        if abs(ratio - round(ratio)) < 1e-9:
            return clock
    return None


def device_args(device, n_prb: int) -> str:  # device: profile.UhdDevice
    args = [f"type={_TYPE[device.family]}"]
    if device.serial:
        args.append(f"serial={device.serial}")
    if device.addr:
        args.append(f"addr={device.addr}")
    clock = device.master_clock_rate_hz or master_clock_hz(device.family, n_prb)
    args.append(f"master_clock_rate={clock / 1e6:g}e6")
    if device.clock_source != "internal":
        args.append(f"clock={device.clock_source}")
    if device.time_source != "internal":
        args.append(f"time_source={device.time_source}")
    if device.family == "b2xx":
        frame = 512 if n_prb < 25 else 9232
        args += ["num_recv_frames=64", "num_send_frames=64", f"recv_frame_size={frame}", f"send_frame_size={frame}"]
    else:
        args += ["recv_frame_size=9232", "send_frame_size=9232"]
    if device.extra_args:
        args.append(device.extra_args)
    return ",".join(args)
