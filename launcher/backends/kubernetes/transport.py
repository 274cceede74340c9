"""HTTP to the API server: TLS as the kubeconfig says, the user's credentials on every request,
proxies, retries, over one urllib3 connection pool.

hvdk8s speaks plain JSON to the API and needs none of the official client's models, so it does
not load that client (importing `kubernetes` costs ~0.2 s: its `config` package pulls in
google-auth and oauthlib whatever the kubeconfig holds, and loading a kubeconfig through it
another ~0.2 s). What client-go's transport does, kept here:
- TLS: certificate-authority(-data), insecure-skip-tls-verify (refused together with a CA, as
  client-go refuses it), tls-server-name, client certificates (rest.TLSClientConfig); the
  context is built once, with either the kubeconfig's CA or the system's, never both;
- credentials in client-go's order: a bearer token or a tokenFile (re-read every minute:
  the kubelet rotates projected tokens; transport/token_source.go caches it for a minute,
  and falls back to `token` when the file cannot be read), basic auth, a client
  certificate, an exec plugin (`exec_credential`) only when none of those is set (the exec
  authenticator's UpdateTransportConfig), and the oidc auth-provider, read by the
  official client's loader (rare; it refreshes an expired id-token at the issuer) and
  read again when its token expires or the server answers 401;
- impersonation: Impersonate-User/-Uid/-Group/-Extra-* on every request;
- proxies as Go decides them (`httpproxy`), with a proxy URL's user:password sent as
  Proxy-Authorization (in the CONNECT for https servers);
- responses requested gzip-compressed (Go's transport does so) unless the cluster says
  disable-compression: true.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlencode, urlsplit

from launcher.backends.kubernetes.exec_credential import Credential, ExecPlugin
from launcher.backends.kubernetes.httpproxy import proxy_for
from launcher.backends.kubernetes.kubeconfig import Connection, kubeconfig_paths, pem_data, truthy
from launcher.errors import UserError

USER_AGENT = "hvdk8s"
TOKEN_FILE_PERIOD = 60.0  # seconds a read token file is trusted (client-go: one minute)
POOL_SIZE = 16  # connections kept per host: a command's watches and requests in flight
# The official loader refreshes an oidc id-token this long before its `exp`
# (kube_config.py EXPIRY_SKEW_PREVENTION_DELAY): the header is read again from then on.
OIDC_SKEW = 300.0


@dataclass(frozen=True)
class Auth:
    """How one request is authenticated (headers; the client certificate lives in TLS)."""

    header: str | None = None
    credential: Credential | None = None  # when it came from an exec plugin


class Credentials:
    """The user's credentials, fetched lazily (an exec plugin runs at the first request, as
    kubectl's does) and refreshed as they expire."""

    def __init__(self, conn: Connection, *, client_cert: bool = False,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time, kubeconfig: str | None = None):
        self.conn = conn
        self.clock = clock
        self.wall_clock = wall_clock
        self.kubeconfig = kubeconfig
        user = conn.user
        self.what = f"kubeconfig user {conn.user_name!r}"
        self.token_file = conn.token_file or user.get("tokenFile") or None
        self.token = user.get("token") or None
        self.basic = None
        if user.get("username") and user.get("password") is not None:
            raw = f"{user['username']}:{user['password']}".encode()
            self.basic = "Basic " + base64.b64encode(raw).decode()
        static = bool(self.token or self.token_file or self.basic)
        self.exec: ExecPlugin | None = None
        if isinstance(user.get("exec"), dict) and not (static or client_cert):
            self.exec = ExecPlugin(user["exec"], user_name=conn.user_name, cluster=conn.cluster,
                                   server=conn.server)
        provider = user.get("auth-provider")
        # client-go's auth-provider round tripper leaves an Authorization already set alone
        self.auth_provider = provider if isinstance(provider, dict) and not static else None
        self._file_token: tuple[str, float] | None = None
        self._provider: tuple[str | None, float | None] | None = None  # (header, good until)
        self._lock = threading.Lock()

    def current(self) -> Auth:
        if self.exec is not None:
            cred = self.exec.credential()
            return Auth(f"Bearer {cred.token}" if cred.token else None, cred)
        if self.token_file:
            return Auth(f"Bearer {self._read_token_file()}")
        if self.token:
            return Auth(f"Bearer {self.token}")
        if self.basic:
            return Auth(self.basic)
        if self.auth_provider is not None:
            return Auth(self._from_auth_provider())
        return Auth()

    def refused(self, auth: Auth) -> bool:
        """After a 401: whether credentials that may differ can be fetched and the request
        tried once more (a plugin's token expired early, a rotated token file, an oidc
        token refreshed)."""
        if auth.credential is not None and self.exec is not None:
            self.exec.forget(auth.credential)
            return True
        if self.token_file:
            with self._lock:
                self._file_token = None
            return True
        if self.auth_provider is not None:
            with self._lock:
                self._provider = None
            return True
        return False

    def _read_token_file(self) -> str:
        with self._lock:
            if self._file_token and self.clock() - self._file_token[1] < TOKEN_FILE_PERIOD:
                return self._file_token[0]
            try:
                with open(str(self.token_file)) as f:
                    token = f.read().strip()
            except OSError as exc:
                # client-go keeps the last good token, else the kubeconfig's `token`
                # (NewBearerAuthWithRefreshRoundTripper)
                if self._file_token:
                    return self._file_token[0]
                if self.token:
                    return self.token
                raise UserError(f"{self.what}: cannot read tokenFile {self.token_file}: "
                                f"{exc.strerror}") from None
            self._file_token = (token, self.clock())
            return token

    def _from_auth_provider(self) -> str | None:
        """The oidc auth-provider's Authorization header, from the official client's
        loader (which refreshes an expired id-token with the refresh-token at the issuer,
        and writes the new tokens back to the kubeconfig, as kubectl does); read again
        once the token is within OIDC_SKEW of its expiry, or after a 401."""
        with self._lock:
            if self._provider is not None:
                header, until = self._provider
                if until is None or self.wall_clock() < until:
                    return header
            header = self._load_auth_provider()
            expires = _jwt_expiry(header)
            self._provider = (header, None if expires is None else expires - OIDC_SKEW)
            return header

    def _load_auth_provider(self) -> str | None:
        from kubernetes import client as k8s
        from kubernetes import config as k8s_config
        from kubernetes.config.config_exception import ConfigException

        cfg = k8s.Configuration()
        try:
            k8s_config.load_kube_config(
                config_file=os.pathsep.join(kubeconfig_paths(self.kubeconfig)),
                context=self.conn.context, client_configuration=cfg, persist_config=True)
        except ConfigException as exc:
            name = self.auth_provider.get("name") if self.auth_provider else None
            raise UserError(f"{self.what}: auth-provider {name!r}: {exc}") from None
        return cfg.api_key.get("BearerToken") or cfg.api_key.get("authorization") or None


def _jwt_expiry(header: str | None) -> float | None:
    """The `exp` claim of a bearer JWT (seconds since the epoch), or None."""
    if not header or not header.startswith("Bearer "):
        return None
    parts = header[7:].split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        return float(claims["exp"])
    except (ValueError, KeyError, TypeError):
        return None


def _ssl_context(conn: Connection, client_cert: tuple[bytes, bytes] | None) -> ssl.SSLContext:
    """One context: the kubeconfig's CA or else the system's trust store (loading the system
    store and then replacing it cost ~20 ms of every command)."""
    cluster = conn.cluster
    what = f"cluster of context {conn.context!r}"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # hostname checked, certificate required
    if truthy(cluster.get("insecure-skip-tls-verify")):
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ca = (_read(conn.ca_file, what) if conn.ca_file else
              pem_data(cluster, "certificate-authority", what))
        if ca:
            try:
                ctx.load_verify_locations(cadata=ca.decode("ascii", "replace"))
            except ssl.SSLError as exc:
                raise UserError(f"{what}: the certificate authority is not a PEM certificate "
                                f"({exc.reason}); fix certificate-authority(-data)") from None
        else:
            ctx.load_default_certs()
    if client_cert:
        _load_client_cert(ctx, *client_cert, what=f"kubeconfig user {conn.user_name!r}")
    return ctx


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise UserError(f"{what}: cannot read {path}: {exc.strerror}") from None


def _load_client_cert(ctx: ssl.SSLContext, cert: bytes, key: bytes, *, what: str) -> None:
    # ssl loads a certificate chain only from files: write them where only we can read, for
    # the moment the call takes.
    with tempfile.TemporaryDirectory(prefix="hvdk8s-tls-") as folder:
        cert_path, key_path = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
        for path, data in ((cert_path, cert), (key_path, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        try:
            ctx.load_cert_chain(cert_path, key_path)
        except ssl.SSLError as exc:
            raise UserError(f"{what}: the client certificate and key do not load "
                            f"({exc.reason}); fix client-certificate/client-key") from None


class Transport:
    """Sends one request; the answer's body is left to the caller (lists stream it)."""

    def __init__(self, conn: Connection, retries: Any, *, kubeconfig: str | None = None):
        import urllib3

        self.conn = conn
        self.retries = retries
        user = conn.user
        what = f"kubeconfig user {conn.user_name!r}"
        cert = pem_data(user, "client-certificate", what)
        key = pem_data(user, "client-key", what)
        if bool(cert) != bool(key):
            raise UserError(f"{what}: a client certificate needs its key (client-certificate "
                            "and client-key, or their -data forms)")
        self._static_cert = (cert, key) if cert and key else None
        self.credentials = Credentials(conn, client_cert=self._static_cert is not None,
                                       kubeconfig=kubeconfig)
        self.https = urlsplit(conn.server).scheme == "https"
        self.proxy = proxy_for(conn.server, conn.cluster)
        # What every request carries besides its credentials.
        self.headers = urllib3.HTTPHeaderDict({"Accept": "application/json"})
        if not truthy(conn.cluster.get("disable-compression")):
            self.headers["Accept-Encoding"] = "gzip"
        for name, value in conn.impersonate.headers():
            self.headers.add(name, value)
        self._pool: Any = None
        self._pool_cert: tuple[bytes, bytes] | None = None
        self._lock = threading.Lock()

    def _pool_for(self, auth: Auth) -> Any:
        cred = auth.credential
        cert = ((cred.cert_pem, cred.key_pem) if cred and cred.cert_pem and cred.key_pem
                else self._static_cert)
        with self._lock:
            if self._pool is None or cert != self._pool_cert:  # a plugin rotated its cert
                if self._pool is not None:
                    self._pool.clear()
                self._pool, self._pool_cert = self._new_pool(cert), cert
            return self._pool

    def _new_pool(self, cert: tuple[bytes, bytes] | None) -> Any:
        import urllib3

        kw: dict[str, Any] = {"maxsize": POOL_SIZE, "retries": self.retries,
                              "headers": {"User-Agent": USER_AGENT}}
        if self.https:
            kw["ssl_context"] = _ssl_context(self.conn, cert)
            if truthy(self.conn.cluster.get("insecure-skip-tls-verify")):
                kw["cert_reqs"] = "CERT_NONE"
                urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
            if self.conn.cluster.get("tls-server-name"):
                kw["server_hostname"] = self.conn.cluster["tls-server-name"]
        if not self.proxy:
            return urllib3.PoolManager(**kw)
        if urlsplit(self.proxy).scheme.startswith("socks"):
            try:
                from urllib3.contrib.socks import SOCKSProxyManager
            except ImportError:
                raise UserError(f"proxy-url {self.proxy}: a SOCKS proxy needs the PySocks "
                                "package (pip install pysocks)") from None
            return SOCKSProxyManager(self.proxy, **kw)
        proxy, proxy_headers = _proxy_credentials(self.proxy)
        return urllib3.ProxyManager(proxy, proxy_headers=proxy_headers, **kw)

    def request(self, method: str, path: str, query: dict, *, body: Any = None,
                content_type: str | None = None, timeout: tuple[float, float | None]):
        """The urllib3 response, body unread (retried by `retries`; one more try after a
        401 when fresher credentials can be had). A redirect to another host loses
        Authorization, Proxy-Authorization and Impersonate-* (client.PolicyRetry); a request
        with a body (a Secret's keys) follows no redirect at all: its 3xx is the answer."""
        import urllib3

        params = [(k, _query_value(v)) for k, v in query.items() if v is not None]
        url = self.conn.server + path + (f"?{urlencode(params)}" if params else "")
        headers = self.headers.copy()
        data = None
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        for attempt in (0, 1):
            auth = self.credentials.current()
            if auth.header:
                headers["Authorization"] = auth.header
            resp = self._pool_for(auth).request(
                method, url, body=data, headers=headers, preload_content=False,
                redirect=data is None,
                timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]))
            if resp.status != 401 or attempt or not self.credentials.refused(auth):
                return resp
            resp.drain_conn()
            resp.release_conn()
        raise AssertionError("unreachable")


def _proxy_credentials(proxy: str) -> tuple[str, dict[str, str]]:
    """The proxy URL without its user:password, and the Proxy-Authorization header they
    make (Go's transport sends it, in the CONNECT for https; urllib3 ignores userinfo)."""
    parts = urlsplit(proxy)
    if not parts.username and not parts.password:
        return proxy, {}
    raw = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}".encode()
    host = parts.netloc.rpartition("@")[2]
    return (parts._replace(netloc=host).geturl(),
            {"Proxy-Authorization": "Basic " + base64.b64encode(raw).decode()})


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
