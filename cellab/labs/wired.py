"""The `wired` lab: server, router and UE namespaces with a tbf bottleneck on the router (a control lab).

    server (10.90.1.1) ── veth ── router ── veth (tbf: rate, buffer) ── UE (10.90.2.2)

Real Linux TCP end to end. The queue sits on the router, not on the sender's own interface, so TCP
small queues cannot hide the bufferbloat.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from cellab.labs import instances, netns
from cellab.labs.base import EmbeddedLab, Host, Topology
from cellab.software import which_record

SERVER_ADDR = "10.90.1.1"
ROUTER_SERVER_SIDE = "10.90.1.2"
ROUTER_UE_SIDE = "10.90.2.1"
UE_ADDR = "10.90.2.2"
MTU_BYTES = 1500


class WiredParams(BaseModel):
    """The run parameters the wired lab acts on."""

    rate_mbit: float = Field(20.0, gt=0, le=10_000, description="bottleneck rate, both directions")
    buffer_bytes: int = Field(150_000, ge=MTU_BYTES, le=1 << 30, description="drop-tail queue at the bottleneck")
    uplink_rate_mbit: float | None = Field(None, gt=0, le=10_000, description="uplink rate (default: rate_mbit)")


class WiredLab(EmbeddedLab):
    kind = "wired"
    params_model = WiredParams

    def __init__(self, prefix: str = "clw", **params: Any):
        self.prefix = instances.check_prefix(prefix, "wired lab")
        self.params = WiredParams(**params)
        self.ns_server = f"{prefix}-srv"
        self.ns_router = f"{prefix}-rtr"
        self.ns_ue = f"{prefix}-ue0"

    def provenance(self) -> dict[str, Any]:
        """The bottleneck is the kernel's tbf (the kernel is in every manifest), set by iproute2's tc."""
        return {"programs": {"tc": which_record("tc", ("-V",))}}

    def up(self) -> Topology:
        netns.require_root("the wired lab")
        self.claim_instance()
        self._remove()  # leftovers of a crashed instance of this prefix go first
        for name in (self.ns_server, self.ns_router, self.ns_ue):
            netns.create(name)
        netns.veth(self.ns_server, "srv0", self.ns_router, "rtr-s")
        netns.veth(self.ns_router, "rtr-u", self.ns_ue, "ue0")
        netns.address(self.ns_server, "srv0", f"{SERVER_ADDR}/24")
        netns.address(self.ns_router, "rtr-s", f"{ROUTER_SERVER_SIDE}/24")
        netns.address(self.ns_router, "rtr-u", f"{ROUTER_UE_SIDE}/24")
        netns.address(self.ns_ue, "ue0", f"{UE_ADDR}/24")
        netns.default_route(self.ns_server, ROUTER_SERVER_SIDE)
        netns.default_route(self.ns_ue, ROUTER_UE_SIDE)
        netns.sysctl(self.ns_router, "net.ipv4.ip_forward", "1")
        self._apply_bottleneck()
        return self.topology()

    def topology(self) -> Topology:
        return Topology(
            server=Host("server", self.ns_server, SERVER_ADDR),
            ues=(Host("ue0", self.ns_ue, UE_ADDR),),
            extra={"router_netns": self.ns_router},
        )

    def configure(self, params: dict[str, Any]) -> None:
        merged = self.params.model_dump() | {k: v for k, v in params.items() if k in WiredParams.model_fields}
        self.params = WiredParams(**merged)
        self._apply_bottleneck()

    def _apply_bottleneck(self) -> None:
        down_bps = int(self.params.rate_mbit * 1e6)
        up_bps = int((self.params.uplink_rate_mbit or self.params.rate_mbit) * 1e6)
        for ifname, rate_bps in (("rtr-u", down_bps), ("rtr-s", up_bps)):
            # Burst: a few ms of tokens (at least two packets), enough for the kernel timer at any HZ.
            burst_bytes = max(2 * MTU_BYTES, rate_bps // 8 // 250)
            netns.tbf(self.ns_router, ifname, rate_bps, self.params.buffer_bytes, burst_bytes)

    def collect(self, run_dir: Path) -> dict[str, Path]:
        path = run_dir / "wired-lab.json"
        path.write_text(self.params.model_dump_json(indent=2))
        return {"lab": path}

    def _remove(self) -> None:
        for name in instances.namespaces_of(self.prefix):
            netns.remove(name)

    def down(self) -> None:
        self._remove()
        self.release_instance()
