"""The rehearsal's pod network: one hub network namespace holding a bridge (the "node"
network, where the DNS server listens) and one network namespace per pod joined to it by a
veth pair. Everything lives inside namespaces this module creates, so no traffic reaches any
interface of the machine; interface names are local to each namespace, only the namespace
names are global, and those carry the creating process id so parallel runs never collide and
a later run removes what a killed run left behind.
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import uuid

PREFIX = "hvdr"
SUBNET = ipaddress.ip_network("10.244.0.0/24")  # exists only inside the hub namespace


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def remove_stale() -> None:
    """Delete namespaces of earlier runs whose process is gone (a run killed with -9)."""
    out = ip("netns", "list", check=False).stdout
    for line in out.splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith(PREFIX):
            continue
        pid = name[len(PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            ip("netns", "del", name, check=False)


class PodNetwork:
    def __init__(self) -> None:
        self.tag = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.hub = f"{self.tag}-hub"
        self.gateway = str(next(SUBNET.hosts()))
        self._next_host = 2
        self.namespaces: list[str] = []

    def start(self) -> None:
        remove_stale()
        ip("netns", "add", self.hub)
        self.namespaces.append(self.hub)
        ip("-n", self.hub, "link", "set", "lo", "up")
        ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        ip("-n", self.hub, "addr", "add", f"{self.gateway}/{SUBNET.prefixlen}", "dev", "br0")
        ip("-n", self.hub, "link", "set", "br0", "up")

    def add_pod(self, pod_name: str) -> tuple[str, str]:
        """A namespace for one pod: (namespace name, pod IP)."""
        index = self._next_host
        self._next_host += 1
        ns = f"{self.tag}-p{index}"
        addr = str(SUBNET.network_address + index)
        ip("netns", "add", ns)
        self.namespaces.append(ns)
        port = f"veth{index}"
        ip("-n", self.hub, "link", "add", port, "type", "veth", "peer", "name", "eth0",
           "netns", ns)
        ip("-n", self.hub, "link", "set", port, "master", "br0", "up")
        ip("-n", ns, "link", "set", "lo", "up")
        ip("-n", ns, "addr", "add", f"{addr}/{SUBNET.prefixlen}", "dev", "eth0")
        ip("-n", ns, "link", "set", "eth0", "up")
        ip("-n", ns, "route", "add", "default", "via", self.gateway)
        return ns, addr

    def close(self) -> None:
        # Pod namespaces first: deleting them removes their veth pairs.
        for ns in reversed(self.namespaces):
            ip("netns", "del", ns, check=False)
        self.namespaces.clear()
