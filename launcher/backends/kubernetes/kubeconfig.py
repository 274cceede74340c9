"""Which cluster, as whom: kubeconfig files (or the pod's service account) resolved to a
`Connection`, with no network and no import of the official client.

Follows kubectl (k8s.io/client-go/tools/clientcmd): `--kubeconfig`, else $KUBECONFIG (a
`:`-separated list), else ~/.kube/config, else the in-cluster service account when running in
a pod. Of several files, the first to name a cluster, user or context wins and the first
current-context wins (loader.go's merge). Relative paths in a file (certificate-authority,
client-certificate, client-key, tokenFile, and an exec command with a `/`) are relative to that
file's folder (loader.go ResolveLocalPaths).
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass, field
from typing import Any

from launcher.backends.kubernetes.kubeconfig_flag import impersonation_flags, kubeconfig_flag
from launcher.errors import UsageError, UserError

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_KUBECONFIG = "~/.kube/config"
# Where nothing is configured at all; `plan` can still work from a cluster file.
NO_KUBECONFIG = ("no kubeconfig found (looked at $KUBECONFIG and ~/.kube/config) and not running "
                 "in a pod")


@dataclass(frozen=True)
class KubeconfigFile:
    path: str
    doc: dict

    @property
    def folder(self) -> str:
        return os.path.dirname(os.path.abspath(self.path))


@dataclass(frozen=True)
class Impersonation:
    """Whom requests act as (kubeconfig `as`, `as-uid`, `as-groups`, `as-user-extra`, or
    --as/--as-group/--as-uid): sent as Impersonate-* headers, which the API server's
    impersonation filter checks against the caller's `impersonate` rights."""

    user: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def headers(self) -> list[tuple[str, str]]:
        """The headers, one line per group and per extra value (client-go's
        ImpersonatingRoundTripper, transport/round_trippers.go; extra keys are
        percent-encoded as it does, since a header name cannot hold every character)."""
        from urllib.parse import quote

        out = [("Impersonate-User", self.user)] if self.user else []
        if self.uid:
            out.append(("Impersonate-Uid", self.uid))
        out += [("Impersonate-Group", g) for g in self.groups]
        out += [(f"Impersonate-Extra-{quote(key, safe='')}", v)
                for key, values in self.extra for v in values]
        return out


@dataclass(frozen=True)
class Connection:
    """Everything a request needs to reach the API server as the chosen user."""

    server: str
    context: str
    namespace: str
    cluster: dict = field(default_factory=dict)  # the kubeconfig's cluster entry, paths resolved
    user: dict = field(default_factory=dict)  # the user entry, paths resolved
    user_name: str = ""
    # Set where the kubeconfig is not the whole story: the pod's service account.
    ca_file: str | None = None
    token_file: str | None = None
    impersonate: Impersonation = field(default_factory=Impersonation)


# --- where the configuration is -------------------------------------------------------------
def kubeconfig_paths(kubeconfig: str | None = None) -> list[str]:
    """The files kubectl would read, in order (existing or not)."""
    value = kubeconfig or kubeconfig_flag() or os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
    return [os.path.expanduser(p) for p in value.split(os.pathsep) if p]


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(
        os.path.join(SERVICE_ACCOUNT_DIR, "token"))


_parsed: dict[tuple[str, int, int], dict | None] = {}


def _load(path: str) -> dict | None:
    """One file's document (None when unreadable or not a mapping), parsed once per
    version of the file: a command asks several times (usable? which context? connect)."""
    import yaml

    try:
        stat = os.stat(path)
    except OSError:
        return None
    key = (path, stat.st_mtime_ns, stat.st_size)
    if key not in _parsed:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        try:
            with open(path) as f:
                doc = yaml.load(f, Loader=loader)  # noqa: S506 (a safe loader)
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            doc = None
        _parsed[key] = doc if isinstance(doc, dict) else None
    return _parsed[key]


def read_kubeconfigs(kubeconfig: str | None = None) -> list[KubeconfigFile]:
    return [KubeconfigFile(path, doc) for path in kubeconfig_paths(kubeconfig)
            if (doc := _load(path)) is not None]


def _named(files: list[KubeconfigFile], section: str, name: str | None
           ) -> tuple[KubeconfigFile, dict] | None:
    """The first file's entry of that name in clusters/users/contexts (kubectl's merge)."""
    if name is None:
        return None
    for f in files:
        for entry in f.doc.get(section) or []:
            if isinstance(entry, dict) and entry.get("name") == name:
                value = entry.get(section[:-1]) or {}
                return f, value if isinstance(value, dict) else {}
    return None


def context_entry(files: list[KubeconfigFile], context: str | None
                  ) -> tuple[str | None, dict | None]:
    """(name, context dict) of the named or current context."""
    if context is None:
        context = next((f.doc.get("current-context") for f in files
                        if f.doc.get("current-context")), None)
    found = _named(files, "contexts", context)
    return context, found[1] if found else None


def current_context_name(kubeconfig: str | None = None) -> str | None:
    """The kubeconfig's current-context (no network, no client import)."""
    return context_entry(read_kubeconfigs(kubeconfig), None)[0]


def context_names(kubeconfig: str | None = None) -> set[str]:
    return {c["name"] for f in read_kubeconfigs(kubeconfig) for c in f.doc.get("contexts") or []
            if isinstance(c, dict) and isinstance(c.get("name"), str)}


def use_in_cluster(context: str | None, kubeconfig: str | None) -> bool:
    if (context is not None or kubeconfig is not None or kubeconfig_flag()
            or os.environ.get("KUBECONFIG")):
        return False
    return in_cluster() and not any(os.path.exists(p) for p in kubeconfig_paths())


def kubeconfig_usable(context: str | None = None, kubeconfig: str | None = None) -> bool:
    """Cheap check (no network, no client import): a usable context exists, or we run in a pod."""
    files = read_kubeconfigs(kubeconfig)
    if files and context_entry(files, context)[1] is not None:
        return True
    return use_in_cluster(context, kubeconfig)


def kubeconfig_source(kubeconfig: str | None = None) -> str | None:
    """How Kubernetes was configured, in the user's words ("--kubeconfig FILE",
    "$KUBECONFIG=...", "~/.kube/config", "the pod's service account"), or None when nothing
    is configured at all: only then may a command fall back to this machine."""
    env = os.environ.get("KUBECONFIG")
    if kubeconfig or kubeconfig_flag():
        return f"--kubeconfig {kubeconfig or kubeconfig_flag()}"
    if env:  # kubectl treats an empty $KUBECONFIG as unset
        return f"$KUBECONFIG={env}"
    if os.path.exists(os.path.expanduser(DEFAULT_KUBECONFIG)):
        return DEFAULT_KUBECONFIG
    if in_cluster():
        return "the pod's service account"
    return None


def config_problem(context: str | None = None, kubeconfig: str | None = None, *,
                   offline: str | None = None) -> str:
    """Why no context can be used, in words that name what the user gave and say what to do
    (kubeconfig_usable is False); `offline` names what works without a cluster, suggested
    when none is configured."""
    paths = kubeconfig_paths(kubeconfig)
    files = read_kubeconfigs(kubeconfig)
    source = kubeconfig_source(kubeconfig)
    if source is None:
        if context:  # the context was named, so the file that has it is what is missing
            return (f"--context {context}: {NO_KUBECONFIG}; pass --kubeconfig FILE (the "
                    "kubeconfig that has this context) or set $KUBECONFIG")
        return (f"{NO_KUBECONFIG}; pass --kubeconfig FILE or set $KUBECONFIG"
                + (f", or {offline}" if offline else ""))
    existing = os.pathsep.join(p for p in paths if os.path.exists(p))
    if not files:
        if in_cluster() and not existing:  # in a pod, but a kubeconfig was asked for
            looked = (source if source.startswith(("--", "$")) else
                      "no kubeconfig found (looked at $KUBECONFIG and ~/.kube/config)")
            return ((f"context {context!r} not found: " if context else "")
                    + f"{looked}{': no such file' if looked == source else ''}; in a pod, "
                    "leave out --context/--kubeconfig and unset KUBECONFIG to use its service "
                    "account")
        if existing:
            return (f"{source}: not a usable kubeconfig ({existing} cannot be read or is not "
                    "a kubeconfig); fix it or point --kubeconfig/$KUBECONFIG at another")
        return f"{source}: no such file; point --kubeconfig/$KUBECONFIG at a kubeconfig"
    context_name, _ = context_entry(files, context)
    if context_name is None:
        return (f"no Kubernetes context: {source} sets no current-context; pass --context NAME "
                "(kubectl config get-contexts lists them)")
    given = "--context " if context else "current-context "
    return (f"{given}{context_name!r} not found in {source} "
            "(kubectl config get-contexts lists them)")


# --- resolving a context --------------------------------------------------------------------
_CLUSTER_PATHS = ("certificate-authority",)
_USER_PATHS = ("client-certificate", "client-key", "tokenFile")


def _resolved(entry: dict, keys: tuple[str, ...], folder: str) -> dict:
    out = dict(entry)
    for key in keys:
        value = out.get(key)
        if isinstance(value, str) and value and not os.path.isabs(os.path.expanduser(value)):
            out[key] = os.path.join(folder, value)
        elif isinstance(value, str) and value:
            out[key] = os.path.expanduser(value)
    exec_spec = out.get("exec")
    if "tokenFile" in keys and isinstance(exec_spec, dict):
        command = exec_spec.get("command")
        # client-go resolves a command only when it is a relative path, not a name on PATH
        if isinstance(command, str) and os.sep in command and not os.path.isabs(command):
            out["exec"] = {**exec_spec, "command": os.path.join(folder, command)}
    return out


def resolve(context: str | None = None, namespace: str | None = None,
            kubeconfig: str | None = None) -> Connection:
    """The chosen context's server, credentials and namespace; UserError saying what to fix."""
    if use_in_cluster(context, kubeconfig):
        return _in_cluster(namespace)
    files = read_kubeconfigs(kubeconfig)
    context_name, entry = context_entry(files, context)
    if entry is None or context_name is None:
        raise UserError(config_problem(context, kubeconfig))
    cluster_name, user_name = entry.get("cluster"), entry.get("user")
    where = f"context {context_name!r}"
    cluster = _named(files, "clusters", cluster_name)
    if cluster is None:
        raise UserError(f"{where} names cluster {cluster_name!r}, which no kubeconfig "
                        f"({kubeconfig_source(kubeconfig)}) defines; fix the context or add the "
                        "cluster (kubectl config set-cluster)")
    user: tuple[KubeconfigFile, dict] | None = None
    if user_name:
        user = _named(files, "users", user_name)
        if user is None:
            raise UserError(f"{where} names user {user_name!r}, which no kubeconfig "
                            f"({kubeconfig_source(kubeconfig)}) defines; fix the context or "
                            "add the user (kubectl config set-credentials)")
    cluster_file, cluster_entry = cluster
    server = cluster_entry.get("server")
    if not isinstance(server, str) or not server:
        raise UserError(f"cluster {cluster_name!r} of {where} has no server: set clusters[]."
                        "cluster.server in the kubeconfig")
    user_entry = user[1] if user else {}
    _refuse(cluster_entry, f"cluster {cluster_name!r}", user_entry, f"user {user_name!r}")
    return Connection(
        server=server.rstrip("/"), context=context_name,
        namespace=namespace or entry.get("namespace") or "default",
        cluster=_resolved(cluster_entry, _CLUSTER_PATHS, cluster_file.folder),
        user=_resolved(user_entry, _USER_PATHS, user[0].folder) if user else {},
        user_name=user_name or "",
        impersonate=impersonation(user_entry, f"user {user_name!r}"))


# auth-provider entries client-go still has: gcp and azure were removed in 1.26
# (plugin/pkg/client/auth/{gcp,azure}: kubectl refuses them and names the exec plugin).
AUTH_PROVIDERS = ("oidc",)
_REMOVED_PROVIDERS = {"gcp": "the exec plugin gke-gcloud-auth-plugin",
                      "azure": "the exec plugin kubelogin (github.com/Azure/kubelogin)"}


def _refuse(cluster: dict, cluster_what: str, user: dict, user_what: str) -> None:
    """What client-go refuses to combine, refused alike (UsageError naming the field)
    rather than half-obeyed."""
    has_ca = bool(cluster.get("certificate-authority") or
                  cluster.get("certificate-authority-data"))
    if truthy(cluster.get("insecure-skip-tls-verify")) and has_ca:
        # transport/transport.go: "specifying a root certificates file with the insecure
        # flag is not allowed"
        raise UsageError(f"kubeconfig {cluster_what}: insecure-skip-tls-verify: true together "
                         "with certificate-authority(-data) is refused (as kubectl does); "
                         "remove one of them")
    has_token = bool(user.get("token") or user.get("tokenFile"))
    if has_token and (user.get("username") or user.get("password")):
        # transport/round_trippers.go HTTPWrappersForConfig
        raise UsageError(f"kubeconfig {user_what}: username/password and token(File) may not "
                         "both be set (kubectl refuses it); remove one of them")
    provider = user.get("auth-provider")
    if provider is not None:
        if isinstance(user.get("exec"), dict):
            # rest/transport.go: "execProvider and authProvider cannot be used in combination"
            raise UsageError(f"kubeconfig {user_what}: exec and auth-provider may not both be "
                             "set (kubectl refuses it); remove one of them")
        name = provider.get("name") if isinstance(provider, dict) else None
        if name in _REMOVED_PROVIDERS:
            raise UsageError(f"kubeconfig {user_what}: auth-provider {name!r} was removed from "
                             f"kubectl and client-go (1.26); use {_REMOVED_PROVIDERS[name]}")
        if name not in AUTH_PROVIDERS:
            raise UsageError(f"kubeconfig {user_what}: auth-provider {name!r} is not one "
                             f"kubectl knows ({', '.join(AUTH_PROVIDERS)}); use an exec plugin")
    proxy = cluster.get("proxy-url")
    if proxy:
        from urllib.parse import urlsplit

        # clientcmd validation.go validateClusterInfo: proxy-url's scheme
        if urlsplit(str(proxy)).scheme not in ("http", "https", "socks5"):
            raise UsageError(f"kubeconfig {cluster_what}: proxy-url {proxy!r} is not an http, "
                             "https or socks5 URL")


def impersonation(user: dict, what: str) -> Impersonation:
    """The user's `as` fields, each replaced by its flag when given (--as, --as-group,
    --as-uid); groups, uid or extra without a user is refused, as the API server does
    (apiserver endpoints/filters/impersonation.go: "without impersonating a user")."""
    flags = impersonation_flags()
    name = flags.user if flags.user is not None else user.get("as")
    groups = flags.groups or user.get("as-groups") or ()
    uid = flags.uid if flags.uid is not None else user.get("as-uid")
    extra = user.get("as-user-extra") or {}
    if not isinstance(groups, list | tuple) or not all(isinstance(g, str) for g in groups):
        raise UsageError(f"kubeconfig {what}: as-groups must be a list of group names")
    if not isinstance(extra, dict) or not all(
            isinstance(v, list) and all(isinstance(x, str) for x in v) for v in extra.values()):
        raise UsageError(f"kubeconfig {what}: as-user-extra must map keys to lists of strings")
    if not name and (groups or uid or extra):
        given = ("--as-group/--as-uid" if flags.groups or flags.uid
                 else f"kubeconfig {what}: as-groups/as-uid/as-user-extra")
        raise UsageError(f"{given} without a user to act as: set --as (or users[].user.as)")
    return Impersonation(user=str(name or ""), uid=str(uid or ""), groups=tuple(groups),
                         extra=tuple((str(k), tuple(v)) for k, v in sorted(extra.items())))


def _in_cluster(namespace: str | None) -> Connection:
    """rest.InClusterConfig: the service's host and port, the mounted CA, and the mounted
    token, re-read as the kubelet rotates it."""
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT") or "443"
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    return Connection(server=f"https://{host}:{port}", context="in-cluster",
                      namespace=namespace or _service_account_namespace(),
                      ca_file=os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt"),
                      token_file=os.path.join(SERVICE_ACCOUNT_DIR, "token"),
                      user_name="the pod's service account",
                      impersonate=impersonation({}, "the pod's service account"))


def _service_account_namespace() -> str:
    """$POD_NAMESPACE, else the mounted namespace file, else default (clientcmd
    inClusterClientConfig.Namespace)."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open(os.path.join(SERVICE_ACCOUNT_DIR, "namespace")) as f:
            return f.read().strip() or "default"
    except OSError:
        return "default"


def default_namespace(context: str | None = None, kubeconfig: str | None = None) -> str:
    """The context's namespace (or the service account's), without connecting."""
    if use_in_cluster(context, kubeconfig):
        return _service_account_namespace()
    _, entry = context_entry(read_kubeconfigs(kubeconfig), context)
    return (entry or {}).get("namespace") or "default"


def pem_data(entry: dict, key: str, what: str) -> bytes | None:
    """The bytes of `key`-data (base64) or of the file `key` names; UserError when neither
    can be read."""
    data = entry.get(f"{key}-data")
    if data:
        try:  # Go's base64 decoder skips line breaks: `base64 FILE` wraps at 76 columns
            return base64.b64decode(str(data).replace("\r", "").replace("\n", ""),
                                    validate=True)
        except (binascii.Error, ValueError):
            raise UserError(f"{what}: {key}-data is not base64; fix it in the kubeconfig") from None
    path = entry.get(key)
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise UserError(f"{what}: cannot read {key} {path}: {exc.strerror}; fix the path in "
                        "the kubeconfig") from None


def truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() == "true")
