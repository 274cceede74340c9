"""Cluster DNS as CoreDNS's kubernetes plugin answers it, served by a real dnsmasq.

Only what CoreDNS would answer exists here:
- `<hostname>.<service>.<ns>.svc.cluster.local` for a pod with `hostname` set and
  `subdomain` equal to the name of a headless Service that selects it (the EndpointSlice
  controller fills the endpoint's hostname only then: kubernetes
  pkg/controller/endpointslice/utils.go `podToEndpoint`), and `<service>.<ns>.svc.cluster.local`
  for all its endpoints;
- a pod is an endpoint once it is Ready, or at once when the Service sets
  `publishNotReadyAddresses` (https://kubernetes.io/docs/concepts/services-networking/dns-pod-service/);
- nothing for short names: dnsmasq is authoritative for cluster.local (`--local`) and has no
  upstream, so `demo-worker-0` or `demo-worker-0.default.svc.cluster.local` is NXDOMAIN.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

CLUSTER_DOMAIN = "cluster.local"


def selects(selector: dict, labels: dict) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def service_records(service: dict, pods: list[dict]) -> list[tuple[str, str]]:
    """(fqdn, ip) for one headless Service; pods carry `ip` and `ready` in their status."""
    meta, spec = service["metadata"], service.get("spec") or {}
    if spec.get("clusterIP") != "None":
        return []  # not needed by hvdk8s; a ClusterIP would need kube-proxy
    ns = meta.get("namespace", "default")
    svc_domain = f"{meta['name']}.{ns}.svc.{CLUSTER_DOMAIN}"
    records = []
    for pod in pods:
        pmeta, pspec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
        if pmeta.get("namespace", "default") != ns:
            continue
        if not selects(spec.get("selector") or {}, pmeta.get("labels") or {}):
            continue
        if not status.get("podIP"):
            continue
        if not (status.get("ready") or spec.get("publishNotReadyAddresses")):
            continue
        records.append((svc_domain, status["podIP"]))
        if pspec.get("hostname") and pspec.get("subdomain") == meta["name"]:
            records.append((f"{pspec['hostname']}.{svc_domain}", status["podIP"]))
    return records


class DNSServer:
    """dnsmasq in the hub namespace, reading records from a directory it watches."""

    def __init__(self, netns: str, address: str, workdir: Path) -> None:
        self.netns, self.address = netns, address
        self.dir = workdir / "dns"
        self.dir.mkdir(parents=True)
        self.proc: subprocess.Popen | None = None
        self._published: set[tuple[str, str]] = set()

    def start(self) -> None:
        log = open(self.dir.parent / "dnsmasq.log", "wb")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.netns, "dnsmasq", "--keep-in-foreground",
             "--conf-file=/dev/null", "--no-resolv", "--no-hosts", "--no-negcache",
             f"--hostsdir={self.dir}", f"--listen-address={self.address}",
             "--bind-interfaces", "--user=root", "--pid-file",
             f"--local=/{CLUSTER_DOMAIN}/", "--log-facility=-"],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def publish(self, records: list[tuple[str, str]]) -> None:
        """Add records (dnsmasq reads new files in its hosts dir by itself)."""
        new = [r for r in records if r not in self._published]
        if not new:
            return
        self._published.update(new)
        name = self.dir / f"r{len(self._published):04d}"
        tmp = self.dir.parent / "dns-record.tmp"  # outside: dnsmasq reads every file
        tmp.write_text("".join(f"{addr} {fqdn}\n" for fqdn, addr in new))
        tmp.rename(name)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
