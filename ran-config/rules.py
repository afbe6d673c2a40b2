"""The rules srsENB enforces across fields (anchors.md §1.2-1.3), checked on the controller.

Each rule returns InputErrors naming the profile file, the field and the allowed values, so a bad profile
fails here and not as a console line on the lab host.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from cellab.ran.bands import BANDWIDTH_MHZ, allowed_ranges, band_of, fits_in_band, ul_fits_in_band
from cellab.ran.render import ZMQ_PORT_STEP
from cellab.ran.uhd_args import master_clock_hz, sample_rate_hz

from cellab.errors import InputError

if TYPE_CHECKING:  # annotations only: the profile's loader applies these rules (no import circle)
    from cellab.ran.profile import EnbProfile

PRACH_PRBS = 6  # a PRACH preamble spans 6 PRBs
# master clock rates each USRP family can run (UHD manuals): the B2xx's AD9361 any rate in 5..61.44 MHz
# (30.72 MHz at most with two channels, 2x2); X300/X310 184.32 or 200 MHz; N300/N310 122.88, 125, 153.6 MHz
# and N320/N321 200, 245.76, 250 MHz
B2XX_CLOCK_RANGE_HZ = (5e6, 61.44e6)
B2XX_TWO_CHANNEL_MAX_HZ = 30.72e6
FIXED_CLOCKS_HZ = {"x3xx": (184.32e6, 200e6), "n3xx": (122.88e6, 125e6, 153.6e6, 200e6, 245.76e6, 250e6)}


def pucch_edge_prbs(profile: EnbProfile) -> int:
    """PRBs at each band edge that PUCCH occupies: srsENB takes max(SR nof_prb, n_rb_cqi)."""
    return max(profile.sr.nof_prb, profile.pucch.n_rb_cqi)


def max_sr_nof_prb(n_prb: int) -> int:
    # 6-PRB cells keep one PUCCH PRB per edge (srsENB forces the PRACH to offset 0 there)
    return 1 if n_prb == 6 else (n_prb - PRACH_PRBS) // 2


def prach_offsets(profile: EnbProfile) -> range:
    n_prb = profile.enb.n_prb
    if n_prb == 6:
        return range(0, 1)
    edge = pucch_edge_prbs(profile)
    return range(edge, n_prb - edge - PRACH_PRBS + 1)


def check_rules(profile: EnbProfile, source: str | Path) -> list[InputError]:
    errors: list[InputError] = []
    n_prb = profile.enb.n_prb

    sr_max = max_sr_nof_prb(n_prb)
    if profile.sr.nof_prb > sr_max:
        errors.append(InputError(source, "sr.nof_prb", f"{profile.sr.nof_prb} SR PRBs per edge leave no room for "
                                 f"the PRACH in a {n_prb}-PRB cell", [f"1..{sr_max}"]))
    offsets = prach_offsets(profile)
    if profile.prach.freq_offset not in offsets:
        where = ("a 6-PRB cell has room for the PRACH at offset 0 only" if n_prb == 6 else
                 f"PRBs 0..{pucch_edge_prbs(profile) - 1} and {n_prb - pucch_edge_prbs(profile)}..{n_prb - 1} "
                 "are PUCCH (max of sr.nof_prb, pucch.n_rb_cqi)")
        allowed = [f"{offsets.start}..{offsets.stop - 1}"] if len(offsets) else ["none: lower sr.nof_prb/n_rb_cqi"]
        errors.append(InputError(source, "prach.freq_offset", f"PRACH PRBs {profile.prach.freq_offset}.."
                                 f"{profile.prach.freq_offset + PRACH_PRBS - 1} fall in the PUCCH region or outside "
                                 f"the cell: {where}", allowed))
    if profile.sr.subframe_offset is not None and profile.sr.subframe_offset >= profile.sr.period_ms:
        errors.append(InputError(source, "sr.subframe_offset", f"{profile.sr.subframe_offset} is not inside the "
                                 f"{profile.sr.period_ms} ms SR period", [f"0..{profile.sr.period_ms - 1}"]))
    if profile.cqi.subframe_offset is not None and profile.cqi.subframe_offset >= profile.cqi.period_ms:
        errors.append(InputError(source, "cqi.subframe_offset", f"{profile.cqi.subframe_offset} is not inside the "
                                 f"{profile.cqi.period_ms} ms CQI period", [f"0..{profile.cqi.period_ms - 1}"]))
    if profile.scheduler.min_aggr_level > profile.scheduler.max_aggr_level:
        errors.append(InputError(source, "scheduler.min_aggr_level", "is above max_aggr_level",
                                 [f"0..{profile.scheduler.max_aggr_level}"]))

    for i, cell in enumerate(profile.cells):
        band = band_of(cell.dl_earfcn)
        if band is None:
            errors.append(InputError(source, f"cells[{i}].dl_earfcn", f"{cell.dl_earfcn} is in no E-UTRA FDD band "
                                     "(TS 36.101 Table 5.7.3-1)", allowed_ranges()))
        elif not fits_in_band(cell.dl_earfcn, n_prb):
            errors.append(InputError(source, f"cells[{i}].dl_earfcn", f"a {BANDWIDTH_MHZ[n_prb]} MHz carrier at EARFCN "
                                     f"{cell.dl_earfcn} sticks out of band {band.band}",
                                     [f"band {band.band}: {band.n_offs_dl}-{band.n_dl_max} with the channel inside"]))
        if cell.rf_port != i:
            errors.append(InputError(source, f"cells[{i}].rf_port", f"{cell.rf_port}: RF ports must be in order "
                                     "starting with 0, one per cell", [i]))
    ids = [cell.cell_id for cell in profile.cells]
    for i, cell_id in enumerate(ids):
        if cell_id in ids[:i]:
            errors.append(InputError(source, f"cells[{i}].cell_id", f"{cell_id} is used by another cell",
                                     ["a cell_id unique in this eNB"]))

    device = profile.rf.device
    if device.kind == "uhd" and device.master_clock_rate_hz is None and master_clock_hz(device.family, n_prb) is None:
        errors.append(InputError(source, "rf.device.master_clock_rate_hz", f"no {device.family} master clock divides "
                                 f"the {n_prb}-PRB sample rate: give one, or choose another n_prb",
                                 ["a rate that is an integer multiple of the sample rate"]))
    errors += _antenna_rules(profile, source)
    errors += _cell_rules(profile, source)
    errors += _scheduler_rules(profile, source)
    errors += _sr_cqi_rules(profile, source)
    errors += _zmq_rules(profile, source) if device.kind == "zmq" else _uhd_rules(profile, source)
    return errors


def _antenna_rules(profile: EnbProfile, source: str | Path) -> list[InputError]:
    """srsENB's parse_rr: TM1 is single-antenna (one port); TM2-4 (diversity, spatial multiplexing) need two."""
    tm, ports = profile.enb.tm, profile.enb.nof_ports
    if tm == 1 and ports != 1:
        return [InputError(source, "enb.tm", f"transmission mode 1 is single-antenna: nof_ports {ports} cannot serve "
                           "it", ["tm 1 with nof_ports 1", "tm 2, 3 or 4 with nof_ports 2"])]
    if tm > 1 and ports != 2:
        return [InputError(source, "enb.tm", f"transmission mode {tm} needs two antenna ports, nof_ports is {ports}",
                           ["tm 1 with nof_ports 1", "tm 2, 3 or 4 with nof_ports 2"])]
    return []


def _cell_rules(profile: EnbProfile, source: str | Path) -> list[InputError]:
    errors = []
    n_prb = profile.enb.n_prb
    seen: dict[tuple[int, int], int] = {}
    for i, cell in enumerate(profile.cells):
        key = (cell.pci, cell.dl_earfcn)
        if key in seen:
            errors.append(InputError(source, f"cells[{i}].pci", f"PCI {cell.pci} on EARFCN {cell.dl_earfcn} is also "
                                     f"cells[{seen[key]}]'s: a UE cannot tell the two cells apart",
                                     ["another PCI (0..503) or another dl_earfcn"]))
        seen.setdefault(key, i)
        band = band_of(cell.dl_earfcn)
        if band is not None and fits_in_band(cell.dl_earfcn, n_prb) and not ul_fits_in_band(cell.dl_earfcn, n_prb):
            ul = cell.dl_earfcn - band.n_offs_dl + band.n_offs_ul
            errors.append(InputError(source, f"cells[{i}].dl_earfcn", f"its uplink (EARFCN {ul}, at the band's duplex "
                                     f"distance) with {BANDWIDTH_MHZ[n_prb]} MHz sticks out of band {band.band}'s uplink "
                                     f"({band.f_ul_low_mhz}-{band.f_ul_high_mhz} MHz)",
                                     [f"band {band.band}: a dl_earfcn whose uplink channel is inside the band"]))
    return errors


def _scheduler_rules(profile: EnbProfile, source: str | Path) -> list[InputError]:
    errors = []
    sched = profile.scheduler
    for link in ("pdsch", "pusch"):
        fixed, top = getattr(sched, f"{link}_mcs"), getattr(sched, f"{link}_max_mcs")
        if fixed >= 0 and top >= 0 and fixed > top:
            errors.append(InputError(source, f"scheduler.{link}_mcs", f"fixed MCS {fixed} is above {link}_max_mcs "
                                     f"{top}", [f"-1 (adaptive) or 0..{top}"]))
    return errors


def _sr_cqi_rules(profile: EnbProfile, source: str | Path) -> list[InputError]:
    """An SR occasion and a periodic CQI report of one UE in the same subframe: without PUSCH the UE sends
    one PUCCH, and the CQI report is dropped (TS 36.213 §7.2.2). Both offsets fixed: an occasion is where
    (10 n_f + n_sf - offset) mod period = 0 for each (TS 36.213 §10.1.5, §7.2.2), so they meet exactly when
    the offsets agree modulo gcd(SR period, CQI period)."""
    sr, cqi = profile.sr, profile.cqi
    if sr.subframe_offset is None or cqi.subframe_offset is None or cqi.mode != "periodic":
        return []
    if sr.subframe_offset >= sr.period_ms or cqi.subframe_offset >= cqi.period_ms:
        return []  # reported by the offset rules
    step = math.gcd(sr.period_ms, cqi.period_ms)
    if sr.subframe_offset % step != cqi.subframe_offset % step:
        return []
    first = next(t for t in range(sr.period_ms * cqi.period_ms)
                 if t % sr.period_ms == sr.subframe_offset and t % cqi.period_ms == cqi.subframe_offset)
    return [InputError(source, "cqi.subframe_offset", f"CQI offset {cqi.subframe_offset} (period {cqi.period_ms} ms) "
                       f"and SR offset {sr.subframe_offset} (period {sr.period_ms} ms) put SR and CQI on the same "
                       f"subframe (subframe {first} and every {math.lcm(sr.period_ms, cqi.period_ms)} ms)",
                       [f"an offset whose remainder modulo {step} is not {sr.subframe_offset % step}"])]


def _is_multiple(clock_hz: float, rate_hz: float) -> bool:
    ratio = clock_hz / rate_hz
    return round(ratio) >= 1 and abs(ratio - round(ratio)) < 1e-9


def _zmq_rules(profile: EnbProfile, source: str | Path) -> list[InputError]:
    errors = []
    dev = profile.rf.device
    if profile.enb.nof_ports != 1:
        # srsRAN's ZMQ radio opens a tx/rx port pair per channel (cells x ports); the rendered device_args
        # give one pair per cell, so a second antenna port would have none and srsenb would stop at start
        errors.append(InputError(source, "enb.nof_ports", "the ZMQ radio is rendered with one channel per cell: "
                                 "nof_ports 2 (tm 2-4) needs a USRP", ["1 (with tm 1)"]))
    rate = sample_rate_hz(None, profile.enb.n_prb)
    if not _is_multiple(dev.base_srate_hz, rate):
        errors.append(InputError(source, "rf.device.base_srate_hz", f"{dev.base_srate_hz / 1e6:g} MHz cannot carry "
                                 f"the {profile.enb.n_prb}-PRB sample rate {rate / 1e6:g} MHz: srsRAN's ZMQ radio "
                                 "decimates by a whole number", [f"{rate / 1e6:g} MHz x k (k = 1, 2, 3, ...)"]))
    # one channel per cell: cell i's ports are the profile's + i * ZMQ_PORT_STEP; every one distinct, in range
    ports: dict[int, str] = {}
    for i in range(len(profile.cells)):
        for field in ("tx_port", "rx_port"):
            port = int(getattr(dev, field).rpartition(":")[2]) + i * ZMQ_PORT_STEP
            what = f"{field} of cell {i}" if len(profile.cells) > 1 else field
            if port > 65535:
                errors.append(InputError(source, f"rf.device.{field}", f"{what} is port {port} (+{ZMQ_PORT_STEP} per "
                                         "cell): outside 1..65535", [f"a port up to {65535 - i * ZMQ_PORT_STEP}"]))
            elif port in ports:
                errors.append(InputError(source, f"rf.device.{field}", f"{what} is port {port}, the same as "
                                         f"{ports[port]}: srsenb would send to itself",
                                         [f"distinct ports (each cell adds {ZMQ_PORT_STEP})"]))
            ports.setdefault(port, what)
    return errors


def _uhd_rules(profile: EnbProfile, source: str | Path) -> list[InputError]:
    dev = profile.rf.device
    n_prb = profile.enb.n_prb
    channels = profile.enb.nof_ports * len(profile.cells)
    field = "rf.device.master_clock_rate_hz"
    errors = []
    if dev.family == "b2xx" and channels > 2:
        errors.append(InputError(source, "cells", f"{len(profile.cells)} cells x {profile.enb.nof_ports} ports need "
                                 f"{channels} RF channels; a B2xx has at most 2", ["cells x nof_ports <= 2"]))
    clock = dev.master_clock_rate_hz
    if clock is None:
        return errors
    rate = sample_rate_hz(dev.family, n_prb)
    if dev.family == "b2xx":
        top = B2XX_TWO_CHANNEL_MAX_HZ if channels > 1 else B2XX_CLOCK_RANGE_HZ[1]
        if not B2XX_CLOCK_RANGE_HZ[0] <= clock <= top:
            errors.append(InputError(source, field, f"{clock / 1e6:g} MHz is outside what a B2xx runs with {channels} "
                                     "channel(s)", [f"{B2XX_CLOCK_RANGE_HZ[0] / 1e6:g}..{top / 1e6:g} MHz"]))
            return errors
    elif not any(abs(clock - c) < 1 for c in FIXED_CLOCKS_HZ[dev.family]):
        errors.append(InputError(source, field, f"{clock / 1e6:g} MHz is not a master clock of a {dev.family}",
                                 [f"{c / 1e6:g} MHz" for c in FIXED_CLOCKS_HZ[dev.family]]))
        return errors
    if not _is_multiple(clock, rate):
        errors.append(InputError(source, field, f"{clock / 1e6:g} MHz cannot serve the {n_prb}-PRB sample rate "
                                 f"{rate / 1e6:g} MHz: UHD decimates the master clock by a whole number",
                                 [f"{rate / 1e6:g} MHz x k within the family's clock range"]))
    return errors
