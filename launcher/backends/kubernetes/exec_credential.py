"""Credentials from an exec plugin (`users[].user.exec`: gke-gcloud-auth-plugin, `aws eks
get-token`, kubelogin, ...), as client-go runs them (k8s.io/client-go/plugin/pkg/client/auth/
exec/exec.go): the command with the kubeconfig's args and env plus KUBERNETES_EXEC_INFO (an
ExecCredential saying whether it may prompt, and the cluster when provideClusterInfo is set);
its stdout is an ExecCredential whose status holds a token or a client certificate and key,
valid until expirationTimestamp (for ever when absent). The answer is cached until then and
run again after a 401. Its stderr is the user's: plugins print their login prompts there.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from launcher.errors import UsageError, UserError

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
# client-go's provideClusterInfo: cluster.extensions[name=this].extension reaches the plugin.
CLUSTER_CONFIG_EXTENSION = "client.authentication.k8s.io/exec"


@dataclass(frozen=True)
class Credential:
    token: str | None = None
    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    expires: float | None = None  # seconds since the epoch


class ExecPlugin:
    def __init__(self, spec: dict, *, user_name: str, cluster: dict, server: str,
                 run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
                 clock: Callable[[], float] = time.time, stdin_is_tty: bool | None = None):
        self.spec = spec
        self.user_name = user_name
        self.cluster = cluster
        self.server = server
        self.run = run
        self.clock = clock
        self.stdin_is_tty = sys.stdin.isatty() if stdin_is_tty is None else stdin_is_tty
        self._cached: Credential | None = None
        self._lock = threading.Lock()
        self.runs = 0
        self._check()

    def _check(self) -> None:
        """What the kubeconfig says wrongly, refused before any request (UsageError)."""
        api_version = self.spec.get("apiVersion")
        if api_version not in API_VERSIONS:
            raise UsageError(f"{self.what}: apiVersion {api_version!r} is not supported; use "
                             f"{' or '.join(API_VERSIONS)}")
        command = self.spec.get("command")
        if not isinstance(command, str) or not command:
            raise UsageError(f"{self.what}: no command; set users[].user.exec.command")
        mode = self.spec.get("interactiveMode")
        if mode is None and api_version == API_VERSIONS[0]:
            raise UsageError(f"{self.what}: interactiveMode must be set for {api_version} "
                             "(Never, IfAvailable or Always)")
        if mode is not None and mode not in ("Never", "IfAvailable", "Always"):
            raise UsageError(f"{self.what}: interactiveMode {mode!r} is not one of Never, "
                             "IfAvailable, Always")

    @property
    def what(self) -> str:
        return f"kubeconfig user {self.user_name!r}: exec plugin {self.spec.get('command')!r}"

    def credential(self) -> Credential:
        with self._lock:
            cached = self._cached
            if cached is None or (cached.expires is not None and cached.expires <= self.clock()):
                self._cached = cached = self._exec()
            return cached

    def forget(self, used: Credential) -> None:
        """The server refused `used` (401): the next credential() runs the plugin again,
        unless another thread already has (client-go's maybeRefreshCredentials)."""
        with self._lock:
            if self._cached is used:
                self._cached = None

    # -- running the plugin --------------------------------------------------------------------
    def _interactive(self) -> bool:
        mode = self.spec.get("interactiveMode") or "IfAvailable"
        if mode == "Never":
            return False
        if mode == "Always" and not self.stdin_is_tty:
            raise UserError(f"{self.what} needs a terminal to log in (interactiveMode: "
                            "Always); run the command in one")
        return self.stdin_is_tty

    def _cluster_info(self) -> dict:
        from launcher.backends.kubernetes.kubeconfig import pem_data, truthy

        info: dict = {"server": self.server}
        ca = pem_data(self.cluster, "certificate-authority", self.what)
        if ca:
            info["certificate-authority-data"] = base64.b64encode(ca).decode()
        for key in ("tls-server-name", "proxy-url"):
            if self.cluster.get(key):
                info[key] = self.cluster[key]
        if truthy(self.cluster.get("insecure-skip-tls-verify")):
            info["insecure-skip-tls-verify"] = True
        for ext in self.cluster.get("extensions") or []:
            if isinstance(ext, dict) and ext.get("name") == CLUSTER_CONFIG_EXTENSION:
                info["config"] = ext.get("extension")
        return info

    def _exec(self) -> Credential:
        api_version = str(self.spec.get("apiVersion"))
        command = str(self.spec.get("command"))
        interactive = self._interactive()
        exec_info: dict = {"apiVersion": api_version, "kind": "ExecCredential",
                           "spec": {"interactive": interactive}}
        if self.spec.get("provideClusterInfo"):
            exec_info["spec"]["cluster"] = self._cluster_info()
        env = dict(os.environ)
        for item in self.spec.get("env") or []:
            if isinstance(item, dict) and item.get("name"):
                env[str(item["name"])] = str(item.get("value") or "")
        env["KUBERNETES_EXEC_INFO"] = json.dumps(exec_info)
        argv = [command, *[str(a) for a in self.spec.get("args") or []]]
        self.runs += 1
        try:
            done = self.run(argv, env=env, stdout=subprocess.PIPE,
                            stdin=None if interactive else subprocess.DEVNULL, check=False)
        except FileNotFoundError:
            hint = self.spec.get("installHint")
            raise UserError(f"{self.what} not found; "
                            + (" ".join(str(hint).split()) if hint else
                               "install it or fix users[].user.exec.command")) from None
        except PermissionError:
            raise UserError(f"{self.what} cannot be run (permission denied)") from None
        if done.returncode != 0:
            raise UserError(f"{self.what} failed with exit code {done.returncode} (its "
                            "message is above); log in again or fix the plugin")
        return self._parse(done.stdout, api_version)

    def _parse(self, out: bytes, api_version: str) -> Credential:
        try:
            doc = json.loads(out)
        except ValueError:
            raise UserError(f"{self.what} printed no ExecCredential JSON") from None
        if not isinstance(doc, dict) or doc.get("kind") != "ExecCredential":
            raise UserError(f"{self.what} printed no ExecCredential JSON")
        if doc.get("apiVersion") != api_version:
            raise UserError(f"{self.what} answered in {doc.get('apiVersion')!r}, not the "
                            f"{api_version} the kubeconfig asks for")
        status = doc.get("status") or {}
        token = status.get("token") or None
        cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
        if bool(cert) != bool(key):
            raise UserError(f"{self.what} gave a client certificate without its key (or the "
                            "key without the certificate)")
        if not token and not cert:
            raise UserError(f"{self.what} gave neither a token nor a client certificate")
        expires = None
        if status.get("expirationTimestamp"):
            try:
                stamp = str(status["expirationTimestamp"]).replace("Z", "+00:00")
                expires = datetime.fromisoformat(stamp).timestamp()
            except ValueError:
                raise UserError(f"{self.what}: expirationTimestamp "
                                f"{status['expirationTimestamp']!r} is not RFC 3339") from None
        return Credential(token=token, cert_pem=cert.encode() if cert else None,
                          key_pem=key.encode() if key else None, expires=expires)
