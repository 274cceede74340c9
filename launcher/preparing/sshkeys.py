"""A fresh SSH key pair per job: the launcher's mpirun logs into the workers with it. A
client dry run shows a placeholder instead (a private key printed into a CI log is a
leaked key); `submit` generates its own."""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from mpijob.k8s.render import SSHKeys


def generate_ssh_keys(comment: str = "hvdk8s") -> SSHKeys:
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    ).decode()
    return SSHKeys(private_key=private, public_key=f"{public} {comment}\n")


PLACEHOLDER = "PLACEHOLDER: hvdk8s submit generates a fresh key pair here"


def placeholder_ssh_keys(comment: str = "hvdk8s") -> SSHKeys:
    return SSHKeys(
        private_key=(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PLACEHOLDER}\n"
                     "-----END OPENSSH PRIVATE KEY-----\n"),
        public_key=f"ssh-ed25519 {PLACEHOLDER.split(':')[0]} {comment}\n")
