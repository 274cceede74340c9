"""Kubeflow Trainer's TrainJobStatus feature: the trainer pods post their progress to the
controller, which writes it to the TrainJob's status.trainerStatus.

A model of github.com/kubeflow/trainer at v2.3.0 (commit 658725bd), where it is alpha and
off by default (pkg/features/features.go TrainJobStatus; cmd/trainer-controller-manager/
main.go starts the server, plugins/registry.go registers the plugin, only when it is on).
Abbreviations below:
  tjs   = pkg/runtime/framework/plugins/trainjobstatus/trainjobstatus.go
          (EnforceMLPolicy: env, token volume; Build: the <job>-tls-config ConfigMap)
  srv   = pkg/statusserver/server.go    (handleTrainJobRuntimeStatus, badRequest,
                                         toApplyConfig, maxBodySize)
  auth  = pkg/statusserver/auth.go      (Authorize, extractRawToken)
  utl   = pkg/statusserver/utils.go     (TokenAudience, StatusUrl)
  types = pkg/apis/trainer/v1alpha1/trainjob_types.go (TrainerStatus, Metric: validation)
  cfg   = pkg/apis/config/v1alpha1/defaults.go (status server port 10443, the webhook's
                                                Service and Secret names)

The pods get Trainer's address, its webhook Service
(`https://kubeflow-trainer-controller-manager.kubeflow-system.svc:10443`, SERVICE_URL),
which the server answers on this machine's loopback (`resolve`: the cluster's DNS and the
Service's port, for code run on what a pod holds: podview.py). Where it differs: a
projected token is an opaque string this module issued (`issue`: the kubelet's
TokenRequest for a pod's projected volume; Trainer verifies a signed JWT through the
cluster's OIDC issuer: signature, expiry, audience, then the namespace claim, and so does
`authorize`); the server's certificate names the loopback, not the Service.
"""

from __future__ import annotations

import json
import re
import secrets
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .pki import make_pki
from .util import deepcopy

GATE = "TrainJobStatus"
# tjs: what the trainer pods get
URL_ENV = "KUBEFLOW_TRAINER_SERVER_URL"
CA_ENV = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
TOKEN_ENV = "KUBEFLOW_TRAINER_SERVER_TOKEN"
MOUNT_PATH = "/var/run/secrets/kubeflow/trainer"
TOKEN_VOLUME = "kubeflow-trainer-token"
TOKEN_EXPIRY_SECONDS = 3600
TLS_SUFFIX = "-tls-config"
# cfg
OPERATOR_NAMESPACE = "kubeflow-system"
WEBHOOK_SERVICE = "kubeflow-trainer-controller-manager"
WEBHOOK_SECRET = "kubeflow-trainer-webhook-cert"
PORT = 10443
# tjs createEnvVars: https://<webhook service>.<operator namespace>.svc:<port>
SERVICE_URL = f"https://{WEBHOOK_SERVICE}.{OPERATOR_NAMESPACE}.svc:{PORT}"
MAX_BODY = 1 << 16  # srv maxBodySize
TRAINJOB_KEY = "trainer.kubeflow.org/trainjobs"
_PATH = re.compile(r"^/apis/trainer\.kubeflow\.org/v1alpha1/namespaces/([^/]+)/trainjobs/"
                   r"([^/]+)/status$")


def audience(namespace: str, name: str) -> str:
    """utl TokenAudience: one audience per TrainJob."""
    return f"trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


def status_path(namespace: str, name: str) -> str:
    """utl StatusUrl."""
    return f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


def _upsert(items: list[dict], new: dict) -> list[dict]:
    return [x for x in items if x.get("name") != new["name"]] + [new]


def enforce(template: dict, trainjob: dict, base_url: str) -> None:
    """tjs EnforceMLPolicy on a JobSet template: the endpoint's env and the token volume go
    to every container of the pod set whose ancestor is the trainer (FindPodSetByAncestor:
    the first such replicated job), and to no other pod."""
    m = trainjob["metadata"]
    for rjob in template.get("replicatedJobs") or []:
        labels = ((rjob["template"].get("metadata") or {}).get("labels") or {})
        if labels.get("trainer.kubeflow.org/trainjob-ancestor-step") != "trainer":
            continue
        pod = rjob["template"]["spec"]["template"].setdefault("spec", {})
        env = [{"name": URL_ENV, "value": base_url + status_path(m["namespace"], m["name"])},
               {"name": CA_ENV, "value": f"{MOUNT_PATH}/ca.crt"},
               {"name": TOKEN_ENV, "value": f"{MOUNT_PATH}/token"}]
        for c in pod.get("containers") or []:
            for e in env:
                c["env"] = _upsert(c.get("env") or [], e)
            c["volumeMounts"] = _upsert(c.get("volumeMounts") or [], {
                "name": TOKEN_VOLUME, "mountPath": MOUNT_PATH, "readOnly": True})
        pod["volumes"] = _upsert(pod.get("volumes") or [], {
            "name": TOKEN_VOLUME, "projected": {"sources": [
                {"serviceAccountToken": {"audience": audience(m["namespace"], m["name"]),
                                         "expirationSeconds": TOKEN_EXPIRY_SECONDS,
                                         "path": "token"}},
                {"configMap": {"name": m["name"] + TLS_SUFFIX,
                               "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}})
        return


def tls_config_map(trainjob: dict, ca_pem: str) -> dict:
    """tjs Build: the webhook Secret's ca.crt, in the TrainJob's namespace, owned by it."""
    m = trainjob["metadata"]
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": m["name"] + TLS_SUFFIX, "namespace": m["namespace"],
                         "ownerReferences": [{
                             "apiVersion": trainjob["apiVersion"], "kind": "TrainJob",
                             "name": m["name"], "uid": m["uid"], "controller": True,
                             "blockOwnerDeletion": True}]},
            "data": {"ca.crt": ca_pem}}


def invalid_fields(status: dict) -> list[str]:
    """types: what the CRD's schema refuses of a trainerStatus (the apply's 422)."""
    out = []

    def integer(key: str, low: int, high: int | None) -> None:
        value = status.get(key)
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int):
            out.append(f"status.trainerStatus.{key}: Invalid value: {value!r}: must be an "
                       "integer")
        elif value < low or (high is not None and value > high):
            bound = f"greater than or equal to {low}" if value < low else \
                f"less than or equal to {high}"
            out.append(f"status.trainerStatus.{key}: Invalid value: {value}: {key} in body "
                       f"should be {bound}")

    integer("progressPercentage", 0, 100)
    integer("estimatedRemainingSeconds", 0, 2 ** 31 - 1)
    metrics = status.get("metrics") or []
    if not isinstance(metrics, list):
        out.append("status.trainerStatus.metrics: Invalid value: must be an array")
        metrics = []
    if len(metrics) > 256:
        out.append(f"status.trainerStatus.metrics: Too many: {len(metrics)}: must have at most "
                   "256 items")
    for i, metric in enumerate(metrics):
        for key in ("name", "value"):
            value = metric.get(key) if isinstance(metric, dict) else None
            if not isinstance(value, str) or not 1 <= len(value) <= 64:
                out.append(f"status.trainerStatus.metrics[{i}].{key}: Invalid value: must be a "
                           "string of 1 to 64 characters")
    if not status.get("lastUpdatedTime"):
        out.append("status.trainerStatus: Invalid value: lastUpdatedTime is required when "
                   "trainerStatus is present")
    return out


class Tokens:
    """Projected ServiceAccount tokens with an audience, as the kubelet requests them for a
    pod's projected volume (TokenRequest: audience, expiry, bound to the pod)."""

    def __init__(self, clock=time.time):
        self.clock = clock
        self._claims: dict[str, dict] = {}
        self._lock = threading.Lock()

    def issue(self, namespace: str, pod: str, aud: str, expiration_seconds: int) -> str:
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._claims[token] = {"aud": aud, "exp": self.clock() + expiration_seconds,
                                   "kubernetes.io": {"namespace": namespace,
                                                     "pod": {"name": pod}}}
        return token

    def verify(self, token: str, aud: str) -> dict | None:
        """The claims of a token that is ours, unexpired and for `aud` (the OIDC verifier's
        signature, expiry and audience checks)."""
        with self._lock:
            claims = self._claims.get(token)
        if claims is None or claims["aud"] != aud or claims["exp"] <= self.clock():
            return None
        return claims


def _raw_token(header: str | None) -> str:
    """auth extractRawToken: exactly `Bearer <token>`, the scheme in any case."""
    parts = (header or "").split()
    return parts[1] if len(parts) == 2 and parts[0].lower() == "bearer" else ""


def authorize(tokens: Tokens, header: str | None, namespace: str, name: str) -> bool:
    """auth Authorize: a valid token for this TrainJob's audience, issued to a pod of its
    namespace."""
    claims = tokens.verify(_raw_token(header), audience(namespace, name))
    return claims is not None and claims["kubernetes.io"]["namespace"] == namespace


class StatusServer:
    """The controller's status server (srv), HTTPS on 127.0.0.1, writing to `store`."""

    def __init__(self, store, clock=time.time):
        self.store = store
        self.tokens = Tokens(clock)
        self.pki = make_pki()
        self.requests: list[tuple[str, int]] = []  # (path, answered status) each
        with tempfile.TemporaryDirectory() as tmp:  # loaded into the context, then gone
            context = self.pki.server_context(Path(tmp))
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
        self._thread: threading.Thread | None = None

    @property
    def ca_pem(self) -> str:
        return self.pki.ca_pem.decode()

    @property
    def base_url(self) -> str:
        return f"https://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> StatusServer:
        if self._thread is None:
            self._thread = threading.Thread(target=self._httpd.serve_forever,
                                            kwargs={"poll_interval": 0.05},
                                            name="trainer-status", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread = None
        self._httpd.server_close()

    def resolve(self, url: str) -> str:
        """A URL of Trainer's Service as a pod reaches it: on this server's address."""
        return self.base_url + url[len(SERVICE_URL):] if url.startswith(SERVICE_URL) else url

    def issue(self, namespace: str, pod: str, aud: str, expiration_seconds: int) -> str | None:
        """The kubelet's TokenRequest for a projected volume (podview.Issuer), for the
        audiences of Trainer's status server only: the model has no other verifier."""
        if not aud.startswith("trainer.kubeflow.org/"):
            return None
        return self.tokens.issue(namespace, pod, aud, expiration_seconds)

    def projected_token(self, pod: dict) -> str | None:
        """What the kubelet writes to the pod's token volume: a token for the audience its
        projected volume names, None when the pod has no such volume (any pod: Trainer's
        node pods, hvdk8s's launcher)."""
        m = pod["metadata"]
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            for source in (volume.get("projected") or {}).get("sources") or []:
                sat = source.get("serviceAccountToken")
                if sat and (token := self.issue(m["namespace"], m["name"],
                                                sat.get("audience") or "",
                                                int(sat.get("expirationSeconds") or 3600))):
                    return token
        return None

    def answer(self, method: str, path: str, header: str | None,
               body: bytes) -> tuple[int, dict]:
        """srv handleTrainJobRuntimeStatus (the route is POST only; handleDefault else)."""
        found = _PATH.match(path)
        if method != "POST" or found is None:
            return _failure("Not found", "NotFound", 404)
        namespace, name = found.groups()
        if not authorize(self.tokens, header, namespace, name):
            return _failure("Forbidden", "Forbidden", 403)
        try:
            request = json.loads(body.decode() or "null")
        except (ValueError, UnicodeDecodeError):
            request = None
        if not isinstance(request, dict):
            return _failure("Invalid payload", "Invalid", 422)
        status = request.get("trainerStatus")
        if status is None:
            return 200, request
        if not isinstance(status, dict):
            return _failure("Invalid payload", "Invalid", 422)
        problems = invalid_fields(status)
        if problems:
            return _failure(f'TrainJob.trainer.kubeflow.org "{name}" is invalid: '
                            f"[{', '.join(problems)}]", "Invalid", 422)
        # toApplyConfig: the fields Trainer knows, applied by its own field manager, which
        # owns the whole of trainerStatus: what a post leaves out is gone after it
        applied = {k: deepcopy(status[k]) for k in
                   ("progressPercentage", "estimatedRemainingSeconds", "metrics",
                    "lastUpdatedTime") if status.get(k) is not None}

        def write(obj: dict) -> None:
            obj.setdefault("status", {})["trainerStatus"] = applied

        if self.store.mutate(TRAINJOB_KEY, namespace, name, write) is None:
            return _failure("Train job not found", "NotFound", 404)
        return 200, {"trainerStatus": applied}


def _failure(message: str, reason: str, code: int) -> tuple[int, dict]:
    """srv badRequest: a metav1.Status."""
    return code, {"status": "Failure", "message": message, "reason": reason, "code": code}


def _handler(server: StatusServer):
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:  # srv bodySizeLimitMiddleware
                code, answer = _failure("Payload too large", "RequestEntityTooLarge", 413)
            else:
                body = self.rfile.read(length)
                code, answer = server.answer(self.command, self.path,
                                             self.headers.get("Authorization"), body)
            server.requests.append((self.path, code))
            data = json.dumps(answer).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_POST = do_GET = do_PUT = _serve

        def log_message(self, *args) -> None:
            pass

    return Handler


def controller_config(gate_on: bool) -> str:
    """manifests/base/manager/controller_manager_config.yaml as the kubeflow-trainer-config
    ConfigMap carries it (featureGates only where set: the Helm chart's
    manager.config.featureGates)."""
    text = (f"certManagement:\n  enable: true\n  webhookServiceName: "
            f"{WEBHOOK_SERVICE}\n  webhookSecretName: {WEBHOOK_SECRET}\n"
            f"statusServer:\n  port: {PORT}\n  qps: 5\n  burst: 10\n")
    return text + (f"featureGates:\n  {GATE}: true\n" if gate_on else "")

