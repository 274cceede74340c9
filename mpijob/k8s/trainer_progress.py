"""What hvdk8s's TrainJob launcher needs to post the job's progress to Kubeflow Trainer's
status endpoint (its `TrainJobStatus` feature; docs/trainer-status.md).

Trainer gives the endpoint's address, CA and a token only to the trainer pods, hvdk8s's
`node` pods running sshd (v2.3.0 pkg/runtime/framework/plugins/trainjobstatus/
trainjobstatus.go EnforceMLPolicy: FindPodSetByAncestor("trainer")), where no hvdk8s
program reads the progress: the ranks, started through sshd, do not inherit it, and the
progress reports are read in the launcher pod. So the launcher gets the same three things
through the TrainJob itself:
- a projected volume: a ServiceAccount token of the TrainJob's audience, with Trainer's
  expiry, and `ca.crt` of the ConfigMap `<job>-tls-config` Trainer makes (optional: where
  the gate is off there is none and the pod starts all the same), mounted where Trainer
  mounts its own (the runtime patch's volume and mount);
- the three variables, exported by the launch script: a runtime patch may not set the
  environment of a container named `node` (pkg/runtime/framework/plugins/jobset/jobset.go
  Validate, "must not have envs for ... node containers"), which the launcher's is.

Trainer accepts such a token from any pod of the TrainJob's namespace: its status server
checks the signature, expiry and the TrainJob's audience, then the token's namespace
claim, and no pod (pkg/statusserver/auth.go Authorize). The token's audience is not the
API server's, so the launcher still holds no API credential. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpijob.wellknown import TRAINER_GROUP, TRAINER_OPERATOR_NAMESPACE

# trainjobstatus.go: the variables, where their files are mounted, the token's expiry
URL_ENV = "KUBEFLOW_TRAINER_SERVER_URL"
CA_ENV = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
TOKEN_ENV = "KUBEFLOW_TRAINER_SERVER_TOKEN"
MOUNT_PATH = "/var/run/secrets/kubeflow/trainer"
CA_FILE, TOKEN_FILE = "ca.crt", "token"
TOKEN_EXPIRY_SECONDS = 3600
TLS_CONFIG_SUFFIX = "-tls-config"
VOLUME = "hvdk8s-trainer-status"
# pkg/apis/config/v1alpha1/defaults.go: the Service the address names (Trainer's webhook
# Service, certManagement.webhookServiceName) and the status server's port (statusServer.port)
DEFAULT_SERVICE = "kubeflow-trainer-controller-manager"
DEFAULT_PORT = 10443


@dataclass(frozen=True)
class StatusEndpoint:
    """Where Trainer's status server answers: `https://<service>.<namespace>.svc:<port>`
    (trainjobstatus.go createEnvVars; the namespace is the controller's own,
    pkg/util/cert/cert.go GetOperatorNamespace)."""

    service: str = DEFAULT_SERVICE
    namespace: str = TRAINER_OPERATOR_NAMESPACE
    port: int = DEFAULT_PORT

    @property
    def base_url(self) -> str:
        return f"https://{self.service}.{self.namespace}.svc:{self.port}"

    def url(self, namespace: str, name: str) -> str:
        """pkg/statusserver/utils.go StatusUrl, on this address."""
        return (f"{self.base_url}/apis/{TRAINER_GROUP}/v1alpha1/namespaces/{namespace}/"
                f"trainjobs/{name}/status")


def endpoint_from_config(config: dict, namespace: str = TRAINER_OPERATOR_NAMESPACE
                         ) -> StatusEndpoint:
    """The address Trainer injects, from its controller config (the ConfigMap's YAML, read
    in the controller's namespace), defaults where it sets nothing."""
    certs = config.get("certManagement") or {}
    server = config.get("statusServer") or {}
    service = certs.get("webhookServiceName") if isinstance(certs, dict) else None
    port = server.get("port") if isinstance(server, dict) else None
    return StatusEndpoint(
        service=service if isinstance(service, str) and service else DEFAULT_SERVICE,
        namespace=namespace,
        port=port if isinstance(port, int) and not isinstance(port, bool) else DEFAULT_PORT)


def audience(namespace: str, name: str) -> str:
    """pkg/statusserver/utils.go TokenAudience: one audience per TrainJob."""
    return f"{TRAINER_GROUP}/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


def launcher_env(endpoint: StatusEndpoint, namespace: str, name: str) -> dict[str, str]:
    return {URL_ENV: endpoint.url(namespace, name),
            CA_ENV: f"{MOUNT_PATH}/{CA_FILE}",
            TOKEN_ENV: f"{MOUNT_PATH}/{TOKEN_FILE}"}


def launcher_volume(namespace: str, name: str) -> dict:
    """The token and CA, as trainjobstatus.go createTokenVolume projects them, the CA
    optional (no ConfigMap where the gate is off: the kubelet then leaves the file out)."""
    return {"name": VOLUME, "projected": {"sources": [
        {"serviceAccountToken": {"audience": audience(namespace, name),
                                 "expirationSeconds": TOKEN_EXPIRY_SECONDS,
                                 "path": TOKEN_FILE}},
        {"configMap": {"name": name + TLS_CONFIG_SUFFIX, "optional": True,
                       "items": [{"key": CA_FILE, "path": CA_FILE}]}}]}}


def launcher_mount() -> dict:
    return {"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True}
