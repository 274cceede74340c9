"""A fresh SSH key pair per job: the launcher's mpirun logs into the workers with it."""

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
