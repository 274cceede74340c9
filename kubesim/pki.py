"""A throwaway CA and a server certificate for 127.0.0.1 and localhost (the dev cluster's
API server, Trainer's status server)."""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    """A CA and a server certificate for 127.0.0.1/localhost, in PEM."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def server_context(self, folder: Path) -> ssl.SSLContext:
        cert, key = folder / "server.crt", folder / "server.key"
        cert.write_bytes(self.cert_pem)
        with os.fdopen(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
            out.write(self.key_pem)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        return ctx


def make_pki() -> Pki:
    """A throwaway CA (two days) and a server certificate signed by it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    later = now + datetime.timedelta(days=2)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hvdk8s-dev-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(later)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          # what kubeadm's CA carries, and what strict verification (Python 3.13's default
          # contexts: VERIFY_X509_STRICT) requires of a CA and the certificates it signs
          .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True,
                                       key_cert_sign=True, content_commitment=False,
                                       data_encipherment=False, key_agreement=False,
                                       crl_sign=False, encipher_only=False,
                                       decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                         critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(later)
            .add_extension(x509.SubjectAlternativeName([
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
                critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    return Pki(ca.public_bytes(pem), cert.public_bytes(pem),
               key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption()))
