"""The server's side of an SGi-path cut (fault `sgi_cut` on a lab inventory, issue 41): nothing the server sends from
the address the UEs reach it at leaves it (a policy-routing rule `from ADDRESS blackhole`, ahead of the main
table), so no data, acknowledgement or reply reaches the UEs, while the rest of the host's traffic (the bus reaches
the agent at another address) is untouched. The end of the fault, and the agent's safe state, delete the rule by its
own priority and address, never another rule. (A rule, not a tc filter: it needs no classifier module, which a
kernel may lack.)"""

from __future__ import annotations

import subprocess

from cellab.bus import OperationFailed, operation
from cellab.contracts.server import LinkParams, LinkResult
from cellab.labs.proc import argv_in

RULE_PRIORITY = 4104  # before the main table's rule (32766), after the local table's (0)
IP_TIMEOUT_S = 10.0


class LinkOps:
    """Mixin for the server agent (its `netns`: the namespace it serves, None for the host)."""

    netns: str | None

    def _ip(self, *words: str) -> subprocess.CompletedProcess:
        return subprocess.run(argv_in(self.netns, ["ip", *words]), capture_output=True, text=True,
                              timeout=IP_TIMEOUT_S, check=False)

    def _device_of(self, address: str) -> str:
        """The interface holding `address` (`ip -o -4 addr show`), or an error naming the address."""
        for line in self._ip("-o", "-4", "addr", "show").stdout.splitlines():
            words = line.split()
            if len(words) > 3 and words[3].split("/")[0] == address:
                return words[1]
        raise OperationFailed(f"no interface of this server holds {address} (the address its inventory entry "
                              "gives the UEs)", field="params.address")

    def _rule(self, action: str, address: str) -> subprocess.CompletedProcess:
        return self._ip("-4", "rule", action, "from", address, "priority", str(RULE_PRIORITY), "blackhole")

    @operation
    def set_link(self, params: LinkParams) -> LinkResult:
        """Cut (`up` false) or restore the server's link to the UEs at `address`."""
        device = self._device_of(params.address)
        while self._rule("del", params.address).returncode == 0:  # idempotent: an earlier cut's rule goes first
            pass
        if params.up:
            self._link_cut = None
            return LinkResult(up=True, device=device)
        done = self._rule("add", params.address)
        if done.returncode != 0:
            raise OperationFailed(f"ip rule add from {params.address} blackhole: {done.stderr.strip()}")
        self._link_cut = params.address
        return LinkResult(up=False, device=device)

    def restore_link(self) -> None:
        """The safe state: a cut left by a run that failed (or a lost controller) is undone."""
        address = getattr(self, "_link_cut", None)
        if address is not None:
            self.set_link(LinkParams(address=address, up=True))
