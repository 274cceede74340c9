"""HTTP plumbing: request parsing, auth, faults, discovery and dispatch to the REST layer."""

from __future__ import annotations

import json
import select
import socket
import ssl
import sys
import threading
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple
from urllib.parse import parse_qs, urlsplit

from . import compression, discovery, errors, routes
from .auth import Attributes
from .impersonation import UserInfo, impersonate
from .rest import RawJSON, Response, Stream


class Request(NamedTuple):
    method: str
    path: str
    query: dict
    content_type: str | None = None
    headers: Any = None  # as received (email.message.Message: get_all for repeated ones)


_HEALTH = ("/healthz", "/livez", "/readyz")


class ChunkWriter:
    """Writes one chunked response; reports whether the client is still there."""

    def __init__(self, handler, stopping: threading.Event):
        self.h = handler
        self.stopping = stopping
        self.sent = 0

    def write(self, data: bytes) -> bool:
        if self.stopping.is_set():
            return False
        try:
            self.h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.sent += len(data)
            return True
        except OSError:
            return False

    def alive(self) -> bool:
        if self.stopping.is_set():
            return False
        sock = self.h.connection
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if isinstance(sock, ssl.SSLSocket):
                # TLS cannot peek (recv flags raise ValueError); a client sends nothing while
                # it reads a stream, so a readable socket is its close_notify or EOF.
                return not readable
            # A readable socket with nothing to read means the peer closed it.
            return not readable or sock.recv(1, socket.MSG_PEEK) != b""
        except OSError:
            return False

    def finish(self) -> None:
        try:
            self.h.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.h.close_connection = True


class App:
    """Everything between the socket and the REST layer; owned by KubeAPIServer."""

    def __init__(self, srv):
        self.srv = srv
        self.stopping = threading.Event()
        self.bytes_out = 0  # response bodies sent, for benchmarks (watch streams included)
        self._count_lock = threading.Lock()

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        srv = self.srv
        method = h.command
        url = urlsplit(h.path)
        path = url.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        with srv._log_lock:
            srv.request_log.append(Request(method, path, query, h.headers.get("Content-Type"),
                                           h.headers))
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        fault = srv.faults.take(method, path, query)
        if fault is not None:
            if fault.status is None:
                if fault.after:
                    try:
                        self._dispatch(h, method, path, query, body)
                    except errors.ApiError:
                        pass
                h.close_connection = True
                try:
                    h.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            return self._send_error(h, fault.error())
        try:
            result = self._dispatch(h, method, path, query, body)
        except errors.ApiError as e:
            return self._send_error(h, e)
        except Exception as e:  # surface server bugs as a 500 the client can show
            traceback.print_exc()
            return self._send_error(h, errors.internal(f"{type(e).__name__}: {e}"))
        if isinstance(result, Stream):
            self._send_stream(h, result)
        else:
            self._send(h, result)

    def _dispatch(self, h, method, path, query, body):
        srv = self.srv
        header = h.headers.get("Authorization")
        if path in _HEALTH or path == "/version":
            # Public to anonymous callers, but bad credentials are a 401 on every path.
            if header:
                srv.tokens.authenticate(header)
            return Response(200, "ok" if path in _HEALTH else
                            discovery.version_info(srv.version))
        cert_user = _client_certificate_user(h)
        if cert_user:
            caller = UserInfo(cert_user)
        else:
            name = srv.tokens.authenticate(header)
            groups = srv.tokens.groups(header)
            extra = srv.tokens.extra(header)
            caller = UserInfo(name, groups or UserInfo(name).groups, extra=extra)
        user = impersonate(srv.policy, caller, h.headers)
        if method == "GET":
            doc = self._discovery(path)
            if doc is not None:
                return Response(200, doc)
        if path.startswith("/api/v1/"):
            group, version, segs = "", "v1", path[len("/api/v1/"):].split("/")
        elif path.startswith("/apis/") and path.count("/") >= 4:
            parts = path[len("/apis/"):].split("/")
            group, version, segs = parts[0], parts[1], parts[2:]
        else:
            raise errors.resource_not_found()
        route = routes.parse(srv.registry, group, version, segs)
        # admission (admission_policy.py) sees who asked, as the request context carries it
        with srv.admission.policies.acting_as(user):
            return self._resource(method, route, query, body, h.headers.get("Content-Type"),
                                  user)

    def _discovery(self, path):
        reg = self.srv.registry
        if path == "/api":
            return discovery.api_versions(f"127.0.0.1:{self.srv.port}")
        if path == "/api/v1":
            return discovery.resource_list(reg, "", "v1")
        if path == "/apis":
            return discovery.api_group_list(reg)
        parts = path.split("/")
        if len(parts) == 3 and parts[1] == "apis":
            doc = discovery.api_group(reg, parts[2])
            if doc is None:
                raise errors.resource_not_found()
            return doc
        if len(parts) == 4 and parts[1] == "apis":
            doc = discovery.resource_list(reg, parts[2], parts[3])
            if doc is None:
                raise errors.resource_not_found()
            return doc
        return None

    def _resource(self, method, route, query, body, content_type, user):
        rest, rt = self.srv.rest, route.rt
        ns, name, sub = route.namespace, route.name, route.subresource
        watch = route.watch_path or query.get("watch", "").lower() in ("true", "1")
        if route.watch_path:
            query = {**query, "watch": "true"}
        if method == "GET":
            verb = "get" if name else ("watch" if watch else "list")
        else:
            verb = {"POST": "create", "PUT": "update", "PATCH": "patch",
                    "DELETE": "delete" if name else "deletecollection"}.get(method)
        if verb is None:
            raise errors.method_not_allowed()
        if rt.key == "authorization.k8s.io/selfsubjectaccessreviews":
            return self._self_access_review(method, name, body, user)
        attr_ns = name if rt.key == "/namespaces" and name else (ns or "")
        self.srv.policy.check(Attributes(user.name, verb, rt.group, rt.plural, sub or "",
                                         attr_ns, name or "", user.groups, user.acting_for))
        if sub == "log":
            if method != "GET":
                raise errors.method_not_allowed()
            return rest.log(ns, name, query)
        if sub == "binding" or rt.key == "/bindings":
            if method != "POST" or (rt.key == "/bindings" and name):
                raise errors.method_not_allowed()
            return rest.bind(ns, name, body, query)
        if sub == "finalize":
            raise errors.method_not_allowed()
        if verb in ("list", "watch"):
            return rest.list(rt, ns, query)
        if verb == "get":
            return rest.get(rt, ns, name)
        if verb == "create":
            if name:
                raise errors.method_not_allowed()
            return rest.create(rt, ns, body, query)
        if verb == "update":
            return rest.update(rt, ns, name, sub, body, query)
        if verb == "patch":
            return rest.patch(rt, ns, name, sub, body, content_type, query)
        if verb == "delete":
            return rest.delete(rt, ns, name, body, query)
        return rest.delete_collection(rt, ns, body, query)

    def _self_access_review(self, method, name, body, user):
        """SelfSubjectAccessReview: any authenticated user may ask what it may do; the answer
        is the authorizer's for spec.resourceAttributes, in status (never stored). As
        pkg/registry/authorization/selfsubjectaccessreview/rest.go: 201 with the spec echoed."""
        if method != "POST" or name:
            raise errors.method_not_allowed()
        try:
            review = json.loads(body or b"{}")
        except ValueError:
            raise errors.bad_request("the body of the request was not valid JSON") from None
        ra = (review.get("spec") or {}).get("resourceAttributes")
        if not isinstance(ra, dict):
            raise errors.invalid("authorization.k8s.io", "SelfSubjectAccessReview", "", [
                ("spec.resourceAttributes", "Required value: exactly one of "
                 "nonResourceAttributes or resourceAttributes must be specified")])
        attrs = Attributes(user.name, ra.get("verb") or "", ra.get("group") or "",
                           ra.get("resource") or "", ra.get("subresource") or "",
                           ra.get("namespace") or "", ra.get("name") or "", user.groups)
        rbac = self.srv.policy.rbac
        try:
            self.srv.policy.check(attrs)
            status = {"allowed": True, "reason": rbac.reason(attrs) if rbac
                      else "allowed by the test server's policy"}
        except errors.ApiError as e:
            status = {"allowed": False}
            if rbac is None or rbac.allows(attrs):  # refused by what a test forbade
                status["reason"] = e.message
        return Response(201, {"kind": "SelfSubjectAccessReview",
                              "apiVersion": "authorization.k8s.io/v1",
                              "metadata": {"creationTimestamp": None},
                              "spec": review.get("spec"), "status": status})

    # -- writing ------------------------------------------------------------------------------
    def _send(self, h, resp: Response) -> None:
        if isinstance(resp.body, RawJSON):  # sent as it is joined, never copied whole
            pieces, length, ctype = resp.body.pieces(), len(resp.body), "application/json"
        else:
            if isinstance(resp.body, (dict, list)):
                data = json.dumps(resp.body, separators=(",", ":")).encode()
                ctype = "application/json"
            else:
                data = resp.body.encode() if isinstance(resp.body, str) else resp.body
                ctype = "text/plain"
            pieces, length = iter((data,)), len(data)
        if self.srv.gzip_responses and compression.wanted(h.headers.get("Accept-Encoding"),
                                                          length):
            compression.send(h, resp.code, ctype, resp.headers, pieces, self._count)
            return
        h.send_response(resp.code)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(length))
        for k, v in resp.headers.items():
            h.send_header(k, v)
        h.end_headers()
        self._count(length)  # before the body: a client that has read it finds it counted
        for piece in pieces:
            h.wfile.write(piece)

    def _count(self, sent: int) -> None:
        with self._count_lock:  # handler threads answer at once
            self.bytes_out += sent

    def _send_error(self, h, e: errors.ApiError) -> None:
        self._send(h, Response(e.code, e.status(), e.headers))

    def _send_stream(self, h, s: Stream) -> None:
        h.send_response(200)
        h.send_header("Content-Type", s.content_type)
        h.send_header("Transfer-Encoding", "chunked")
        for k, v in s.headers.items():
            h.send_header(k, v)
        h.end_headers()
        writer = ChunkWriter(h, self.stopping)
        try:
            s.run(writer)
        finally:
            writer.finish()
            self._count(writer.sent)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked streams, like the real apiserver
    server_version = "kubeapi-test"

    def setup(self):
        super().setup()
        # Headers and body go out in separate writes; without NODELAY, Nagle plus the
        # client's delayed ACK adds ~40 ms to every keep-alive request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.conns_lock:
            self.server.conns.add(self.connection)

    def finish(self):
        try:
            super().finish()
        finally:
            with self.server.conns_lock:
                self.server.conns.discard(self.connection)

    def _any(self):
        self.server.app.handle(self)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _any

    def log_message(self, format, *args):  # noqa: A002 - keep pytest output clean
        pass


def _client_certificate_user(h) -> str | None:
    """The x509 authenticator (k8s.io/apiserver/pkg/authentication/request/x509): a client
    certificate the TLS handshake verified against the client CA names the user in its
    Common Name. kube-apiserver's union authenticator tries it before bearer tokens."""
    getpeercert = getattr(h.connection, "getpeercert", None)
    cert = getpeercert() if getpeercert else None
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return None


class HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256

    def __init__(self, app: App, tls: ssl.SSLContext | None = None, port: int = 0):
        self.app = app
        self.conns: set = set()
        self.conns_lock = threading.Lock()
        super().__init__(("127.0.0.1", port), _Handler)
        if tls is not None:  # the handshake happens in the connection's thread, on first read
            self.socket = tls.wrap_socket(self.socket, server_side=True,
                                          do_handshake_on_connect=False)

    def handle_error(self, request, client_address) -> None:
        # Clients hanging up (or stop() shutting sockets) is normal, not worth a traceback.
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)

    def close_connections(self) -> None:
        with self.conns_lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
