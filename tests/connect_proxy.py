"""A forward proxy on loopback for tests, as a corporate proxy behaves (RFC 9110 CONNECT,
RFC 7235 Proxy-Authorization with the Basic scheme, 407 without it): it tunnels CONNECT
host:port to that address (names in `hosts` first, as the proxy's own DNS would answer
them, so a client may reach a name this machine cannot resolve) and records what it saw."""

from __future__ import annotations

import base64
import select
import socket
import socketserver
import threading
from dataclasses import dataclass, field


@dataclass
class Seen:
    target: str
    authorization: str | None


@dataclass
class ConnectProxy:
    user: str | None = None
    password: str | None = None
    hosts: dict[str, str] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    refused: int = 0

    def __enter__(self) -> ConnectProxy:
        proxy = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                proxy._handle(self.connection, self.rfile)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        # shutdown() waits for the loop's next wake-up (0.5 s by default)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01},
                         daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def url(self, *, user: str | None = None, password: str | None = None) -> str:
        auth = f"{user}:{password}@" if user is not None else ""
        return f"http://{auth}127.0.0.1:{self.port}"

    def _handle(self, conn: socket.socket, rfile) -> None:
        request = rfile.readline().decode("latin-1").split()
        headers: dict[str, str] = {}
        while (line := rfile.readline().decode("latin-1").strip()):
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if len(request) != 3 or request[0] != "CONNECT":
            conn.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return
        auth = headers.get("proxy-authorization")
        self.seen.append(Seen(request[1], auth))
        if self.user is not None:
            expected = "Basic " + base64.b64encode(
                f"{self.user}:{self.password}".encode()).decode()
            if auth != expected:
                self.refused += 1
                conn.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                             b'Proxy-Authenticate: Basic realm="corp"\r\nContent-Length: 0\r\n\r\n')
                return
        host, _, port = request[1].rpartition(":")
        upstream = socket.create_connection((self.hosts.get(host, host), int(port)))
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        # (the client sends nothing more before this answer, so rfile holds no bytes of it)
        with upstream:
            ends = [conn, upstream]
            while True:
                ready, _, _ = select.select(ends, [], [], 30)
                if not ready:
                    return
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    (upstream if s is conn else conn).sendall(data)
