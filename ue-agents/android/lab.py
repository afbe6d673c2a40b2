"""Lab kind `virtual-android`: the virtual lab whose UEs are virtual phones behind the fake adb server,
reached by the Android UE agent through the real adb client.

The cell, namespaces and parameters are the `virtual` lab's (loaded through the `cellab.labs` entry
point; rooms do not import each other). Each UE namespace gets a virtual Android 14 phone (rooted,
so cc and tcpdump work) whose programs run in that namespace and whose dumpsys reports the cell's
signal for that UE. `ue_agent_spec` tells the session to start `cellab agent --role ue --kind android
--serial S --adb-port P` instead of the virtual UE agent.
"""

from __future__ import annotations

from typing import Any

from cellab.contracts.registry import load
from cellab.labs.base import AgentSpec, Host, Topology

from .fakeadb import FakeAdbServer
from .phones import VirtualPhone

_VirtualLab: Any = load("cellab.labs", "virtual", "embedded lab")
PHONE_MODEL = "android14"


class VirtualAndroidLab(_VirtualLab):  # type: ignore[misc, valid-type]
    kind = "virtual-android"

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.adb_server: FakeAdbServer | None = None

    def serial(self, index: int) -> str:
        return f"vphone-{self.prefix}-{index}"

    def up(self) -> Topology:
        topo = super().up()
        if self.adb_server is None:
            server = FakeAdbServer(0)
            for i, host in enumerate(topo.ues):
                server.add_phone(VirtualPhone(self.serial(i), PHONE_MODEL, self.state_dir / "phones" / str(i),
                                              netns=host.netns, cell_ctl=topo.extra["ctl"], cell_ue=i))
            self.adb_server = server.start()
        return self.topology()

    def topology(self) -> Topology:
        topo = super().topology()
        if self.adb_server is None:
            return topo
        return Topology(topo.server, topo.ues, {**topo.extra, "adb_port": self.adb_server.port,
                                                "phones": [self.serial(i) for i in range(len(topo.ues))]})

    def ue_agent_spec(self, name: str, index: int, host: Host) -> AgentSpec:
        """The UE agent for UE `index`: the Android agent on its virtual phone (no --netns/--cell-ctl: the
        phone runs its programs in the namespace and reads the cell itself)."""
        if self.adb_server is None:
            raise RuntimeError("virtual-android lab: up() first")
        return AgentSpec(name, "ue", kind="android",
                         args=("--serial", self.serial(index), "--adb-port", str(self.adb_server.port)))

    def down(self) -> None:
        if self.adb_server is not None:
            self.adb_server.stop()
            self.adb_server = None
        super().down()
