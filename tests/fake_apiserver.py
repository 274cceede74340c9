"""A minimal Kubernetes API server over HTTP for the agent's tests: Nodes (get, merge
patch), Namespaces (get) and create/replace of the agent's four kinds. Enough for the real
kubernetes client to talk to; it records every request."""

from __future__ import annotations

import copy
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

_ITEM = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+/[^/]+))(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[a-z]+)(?:/(?P<name>[^/?]+))?$"
)


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class FakeApiServer:
    def __init__(self):
        self.objects: dict[tuple[str, str | None, str], dict] = {}  # (plural, ns, name)
        self.requests: list[tuple[str, str, str | None, dict | None]] = []
        self.fail_next: list[int] = []  # statuses to answer the next requests with
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _body(self):
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length)) if length else None

            def _handle(self):
                body = self._body()
                path = self.path.split("?", 1)[0]
                server.requests.append((self.command, path, self.headers.get("Content-Type"), body))
                status, answer = server.answer(self.command, path, self.headers.get("Content-Type"), body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def kubeconfig(self, directory: Path, context: str = "fake") -> Path:
        path = directory / "kubeconfig"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "t"}}],
            "contexts": [{"name": context, "context": {"cluster": "fake", "user": "fake"}}],
        }))
        return path

    def add(self, plural: str, obj: dict, namespace: str | None = None) -> None:
        self.objects[(plural, namespace, obj["metadata"]["name"])] = obj

    def get(self, plural: str, name: str, namespace: str | None = None) -> dict | None:
        return self.objects.get((plural, namespace, name))

    @staticmethod
    def _status(code: int, reason: str, message: str) -> tuple[int, dict]:
        return code, {"apiVersion": "v1", "kind": "Status", "status": "Failure",
                      "message": message, "reason": reason, "code": code}

    def answer(self, verb: str, path: str, content_type: str | None, body: dict | None):
        if self.fail_next:
            return self._status(self.fail_next.pop(0), "InternalError", "injected failure")
        m = _ITEM.match(path)
        if not m:
            return self._status(404, "NotFound", f"no route {path}")
        plural, ns, name = m["plural"], m["ns"], m["name"]
        key = (plural, ns, name)
        if verb == "GET":
            if key not in self.objects:
                return self._status(404, "NotFound", f'{plural} "{name}" not found')
            return 200, self.objects[key]
        if verb == "POST":
            key = (plural, ns, body["metadata"]["name"])
            if key in self.objects:
                return self._status(409, "AlreadyExists", f'{plural} "{key[2]}" already exists')
            self.objects[key] = body
            return 201, body
        if verb == "PUT":
            if key not in self.objects:
                return self._status(404, "NotFound", f'{plural} "{name}" not found')
            self.objects[key] = body
            return 200, body
        if verb == "PATCH":
            if content_type != "application/merge-patch+json":
                return self._status(415, "UnsupportedMediaType", f"this fake only merge-patches, got {content_type}")
            if key not in self.objects:
                return self._status(404, "NotFound", f'{plural} "{name}" not found')
            self.objects[key] = merge_patch(self.objects[key], body)
            return 200, self.objects[key]
        return self._status(405, "MethodNotAllowed", verb)


def node(name: str, annotations: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": dict(annotations or {}),
                         "labels": {"nvidia.com/gpu.present": "true"}}}
