"""A throwaway PKI for TLS tests, made by the real `openssl` command: a CA, a server
certificate and client certificates signed by it."""

from __future__ import annotations

import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    folder: Path

    @property
    def ca(self) -> Path:
        return self.folder / "ca.crt"

    def server_context(self, name: str = "server", *, client_ca: bool = True) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.folder / f"{name}.crt", self.folder / f"{name}.key")
        if client_ca:  # as kube-apiserver's --client-ca-file: a certificate is optional
            ctx.verify_mode = ssl.CERT_OPTIONAL
            ctx.load_verify_locations(self.ca)
        return ctx


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _issue(folder: Path, name: str, subject: str, ext: str) -> None:
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=folder)
    (folder / f"{name}.ext").write_text(ext)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-out", f"{name}.crt", "-extfile", f"{name}.ext",
             cwd=folder)


def make_pki(folder: Path, *, clients: tuple[str, ...] = ("alice",)) -> Pki:
    """ca.crt; server.crt for 127.0.0.1 and localhost; other.crt for the API server's
    in-cluster name only; a client certificate (CN = user) per name."""
    folder.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=test-ca",
             # as a real cluster CA has them; Python 3.13's default contexts verify strictly
             # (VERIFY_X509_STRICT) and refuse a CA without its key usage
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,digitalSignature,keyCertSign,cRLSign",
             cwd=folder)
    _issue(folder, "server", "/CN=kube-apiserver",
           "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    _issue(folder, "other", "/CN=kube-apiserver",
           "subjectAltName=DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n")
    for user in clients:
        _issue(folder, user, f"/CN={user}/O=team", "extendedKeyUsage=clientAuth\n")
    return Pki(folder)
