"""The srsran-zmq lab's run parameters and where it finds its programs: what a campaign may set
(`ZmqLabParams`, checked by `validate_params`), which EPC runs (`default_core`), the srsRAN bundle
(`srsran_bin_dir`) and the subscribers its UEs' USIMs match (`subscribers_csv`). The lab itself: zmqlab.py."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cellab.errors import CellabError, InputError, from_validation_error
from cellab.paths import PROJECT_ROOT

from .srsenb_proc import BIN_ENV
from .srsue_proc import ue_usim

BUNDLE_BIN = PROJECT_ROOT.parent / "shared" / "tools" / "srsran" / "bin"
ENB_PROFILE = Path(__file__).resolve().parent / "examples" / "zmq-25prb.yaml"
CORE_PROFILE = PROJECT_ROOT / "core-config" / "examples" / "srsran-zmq.yaml"
# the EPC behind srsenb: the core room's profile per core (same PLMN, TAC, S1 addresses, APN and UE pool)
CORE_PROFILES = {"srsepc": CORE_PROFILE, "open5gs": PROJECT_ROOT / "core-config" / "examples" / "srsran-zmq-open5gs.yaml"}
CORE_ENV = "CELLAB_ZMQ_CORE"  # the lab's core when a run does not name one (`make demo-srsran CORE=...`)
OPEN5GS_BUNDLE = PROJECT_ROOT.parent / "shared" / "tools" / "open5gs"  # as the core agent finds it
OPEN5GS_DIR_ENV = "CELLAB_OPEN5GS_DIR"
MAX_ATTENUATION_DB = 25.0


def ue_addr(index: int) -> str:
    """UE `index`'s static IP (its subscriber row): 172.16.0.2, .3, ..."""
    return f"172.16.0.{2 + index}"


class ZmqLabParams(BaseModel):
    """The run parameters the srsran-zmq lab acts on (what srsENB over ZMQ supports here)."""

    model_config = ConfigDict(extra="forbid")

    core: Literal["open5gs", "srsepc"] | None = Field(
        None, description=f"the EPC: Open5GS 2.7 (MME, SGW-C/U, SMF, UPF, HSS, PCRF on FerretDB) or srsEPC; "
                          f"default ${CORE_ENV}, else open5gs when installed (${OPEN5GS_DIR_ENV}, "
                          f"../shared/tools/open5gs or PATH, and cellab-ferretdb built), else srsepc. A change "
                          f"restarts the stack")

    n_prb: Literal[6, 15, 25, 50] = 25
    sr_period_ms: Literal[5, 10, 20, 40, 80] = 20
    cqi_period_ms: Literal[2, 5, 10, 20, 40, 80, 160, 32, 64, 128] = 40
    attenuation_db: float = Field(0.0, ge=0, le=MAX_ATTENUATION_DB, allow_inf_nan=False,
                                  description="eNB cell_gain -attenuation_db against srsue's fixed DL "
                                              "noise floor: SNR 30 - attenuation_db dB")
    rlc_queue: str | int = Field("srsenb", description="the DL RLC queue: on the real stack srsenb's own")

    @field_validator("rlc_queue")
    @classmethod
    def _real_queue_only(cls, value: str | int) -> str:
        if value != "srsenb":
            raise ValueError(f"{value!r}: the real srsenb's RLC queue is fixed by srsenb itself; "
                             "allowed: 'srsenb' (a byte size is a virtual-cell setting)")
        return value


RESTART_FIELDS = ("n_prb", "sr_period_ms", "cqi_period_ms")  # srsenb reads them only at start


def open5gs_installed() -> bool:
    """Open5GS's MME where the core agent looks for it, and the FerretDB its profile runs (db_local)."""
    from cellab.paths import find_program

    named = os.environ.get(OPEN5GS_DIR_ENV)
    mme = (Path(named) / "bin" / "open5gs-mmed").is_file() if named else (
        (OPEN5GS_BUNDLE / "bin" / "open5gs-mmed").is_file() or shutil.which("open5gs-mmed") is not None)
    try:
        find_program("cellab-ferretdb")
    except CellabError:
        return False
    return mme


def default_core() -> str:
    """$CELLAB_ZMQ_CORE, else Open5GS when it is installed, else srsEPC (the srsRAN bundle's); a value that is no
    core is refused naming the variable."""
    value = os.environ.get(CORE_ENV) or ("open5gs" if open5gs_installed() else "srsepc")
    if value not in CORE_PROFILES:
        raise InputError(f"${CORE_ENV}", "core", f"{value!r} is not a core of the srsran-zmq lab",
                         sorted(CORE_PROFILES))
    return value


def srsran_bin_dir() -> Path:
    """The folder with srsenb, srsue and srsepc: $CELLAB_SRSRAN_BIN, else ../shared/tools/srsran/bin, else PATH."""
    searched = []
    for folder in filter(None, [os.environ.get(BIN_ENV), str(BUNDLE_BIN)]):
        searched.append(folder)
        if all((Path(folder) / p).is_file() for p in ("srsenb", "srsue", "srsepc")):
            return Path(folder).resolve()
    on_path = shutil.which("srsenb")
    searched.append("PATH")
    if on_path and all(shutil.which(p) for p in ("srsue", "srsepc")):
        return Path(on_path).resolve().parent
    raise CellabError("srsran-zmq lab: srsenb, srsue and srsepc not found together; searched: "
                      + "; ".join(searched) + f" (set {BIN_ENV} to an srsRAN 4G bin folder)")


def subscribers_csv(n_ues: int = 1) -> str:
    """The subscribers the UEs' USIMs match (one row each, its static IP), in the core room's CSV format."""
    rows = ["name,imsi,k,opc,amf,apn,static_ip,sqn,qci"]
    for i in range(n_ues):
        u = ue_usim(i)
        rows.append(f"ue{i + 1},{u['imsi']},{u['k']},{u['opc']},8000,srsapn,{ue_addr(i)},0,7")
    return "\n".join(rows) + "\n"


def validate_params(params: dict[str, Any], source: str = "run parameters") -> ZmqLabParams:
    own = {k: v for k, v in params.items() if k in ZmqLabParams.model_fields and v is not None}
    try:
        return ZmqLabParams(**own)
    except ValidationError as exc:
        raise from_validation_error(source, exc) from None
