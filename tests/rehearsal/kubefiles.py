"""The files a kubelet writes for a pod, written the way it writes them.

- ConfigMap/Secret volumes: the atomic writer's layout (kubernetes pkg/volume/util/
  atomic_writer.go): the payload in a `..<timestamp>` directory, a `..data` symlink to it, and
  one symlink per top-level name pointing into `..data`; file modes from `items[].mode` or
  `defaultMode` (0644 when unset), owned by root. The volume's own directory is the emptyDir
  the plugin wraps (pkg/volume/secret/secret.go, configmap/configmap.go): a Secret's is a
  tmpfs, whose root is 1777, and emptyDir's setupDir (pkg/volume/emptydir/empty_dir.go)
  only chmods it to 0777 when the permission bits differ, so the sticky bit stays
  (`drwxrwxrwt`); a ConfigMap's is a directory on disk set to 0777. sshd's StrictModes
  refuses an `~/.ssh` like that.
- /etc/hosts (pkg/kubelet/kubelet_pods.go `managedHostsFileContent`): localhost lines, then
  the pod IP with `<hostname>.<subdomain>.<ns>.svc.<domain>` and the hostname when the pod
  sets a subdomain, else the pod IP with the hostname.
- /etc/resolv.conf for dnsPolicy ClusterFirst (pkg/kubelet/network/dns/dns.go): the cluster
  DNS server, `search <ns>.svc.<domain> svc.<domain> <domain>`, `options ndots:5`, then the
  pod's `dnsConfig` appended (searches and options merged, duplicates dropped).
"""

from __future__ import annotations

import base64
import datetime
import os
from pathlib import Path

from tests.rehearsal.coredns import CLUSTER_DOMAIN


def secret_payload(secret: dict) -> dict[str, bytes]:
    out = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
    out.update({k: v.encode() for k, v in (secret.get("stringData") or {}).items()})
    return out


def configmap_payload(cm: dict) -> dict[str, bytes]:
    out = {k: v.encode() for k, v in (cm.get("data") or {}).items()}
    out.update({k: base64.b64decode(v) for k, v in (cm.get("binaryData") or {}).items()})
    return out


def write_atomic_volume(target: Path, payload: dict[str, bytes], source: dict,
                        *, root_mode: int = 0o777) -> None:
    """source: the pod's `configMap:` or `secret:` volume source (items, defaultMode);
    root_mode: the volume directory's (module docstring: 0o1777 for a Secret)."""
    default_mode = source.get("defaultMode", 0o644)
    if source.get("items"):
        files = [(it["path"], payload[it["key"]], it.get("mode", default_mode))
                 for it in source["items"] if it["key"] in payload or not source.get("optional")]
    else:
        files = [(key, data, default_mode) for key, data in payload.items()]
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("..%Y_%m_%d_%H_%M_%S.%f")
    target.mkdir(parents=True, exist_ok=True)
    target.chmod(root_mode)
    data_dir = target / stamp
    data_dir.mkdir()
    for rel, data, mode in files:
        path = data_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.chown(path, 0, 0)
        path.chmod(mode)
    (target / "..data").symlink_to(stamp)
    for top in sorted({rel.split("/", 1)[0] for rel, _, _ in files}):
        (target / top).symlink_to(f"..data/{top}")


def hosts_file(pod: dict, pod_ip: str) -> str:
    spec, ns = pod["spec"], pod["metadata"].get("namespace", "default")
    hostname = spec.get("hostname") or pod["metadata"]["name"]
    lines = ["# Kubernetes-managed hosts file.", "127.0.0.1\tlocalhost",
             "::1\tlocalhost ip6-localhost ip6-loopback", "fe00::0\tip6-localnet",
             "fe00::0\tip6-mcastprefix", "fe00::1\tip6-allnodes", "fe00::2\tip6-allrouters"]
    if spec.get("subdomain"):
        fqdn = f"{hostname}.{spec['subdomain']}.{ns}.svc.{CLUSTER_DOMAIN}"
        lines.append(f"{pod_ip}\t{fqdn}\t{hostname}")
    else:
        lines.append(f"{pod_ip}\t{hostname}")
    return "\n".join(lines) + "\n"


def resolv_conf(pod: dict, nameserver: str) -> str:
    ns = pod["metadata"].get("namespace", "default")
    dns = pod["spec"].get("dnsConfig") or {}
    searches = [f"{ns}.svc.{CLUSTER_DOMAIN}", f"svc.{CLUSTER_DOMAIN}", CLUSTER_DOMAIN]
    for s in dns.get("searches") or []:
        if s not in searches:
            searches.append(s)
    servers = [nameserver] + [s for s in dns.get("nameservers") or [] if s != nameserver]
    options = {"ndots": "5"}
    for opt in dns.get("options") or []:
        options[opt["name"]] = opt.get("value")
    opts = " ".join(k if v is None else f"{k}:{v}" for k, v in options.items())
    return ("".join(f"nameserver {s}\n" for s in servers)
            + f"search {' '.join(searches)}\noptions {opts}\n")
