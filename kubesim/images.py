"""Which image references the kubelet model cannot pull, and the words it says about them.

Two rules any real node follows, so they hold on every model node without a test asking:

- a reference that does not parse is InvalidImageName, never pulled: kubelet
  pkg/kubelet/images/image_manager.go EnsureImageExists -> applyDefaultImageTag
  (`Failed to apply default image tag %q: couldn't parse image reference %q: %v`, event
  InspectFailed), the grammar being github.com/distribution/reference regexp.go;
- a registry host in the `.invalid` top-level domain never resolves (RFC 6761 section 6.4:
  resolvers answer NXDOMAIN), so its pull fails as containerd reports a host that does not
  resolve (core/remotes/docker/resolver.go "failed to do request", wrapped by the CRI
  plugin's PullImage "failed to pull and unpack image" and the resolver's "failed to
  resolve reference"); the kubelet then says ErrImagePull and backs off.

`hvdk8s dev cluster` documents the second as its way to try an image that does not pull.
"""

from __future__ import annotations

import re

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(
    rf"(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?")
NAME_TOTAL_LENGTH_MAX = 255  # reference.go
# What a node with systemd-resolved asks (containerd resolves with the node's resolv.conf).
NODE_RESOLVER = "127.0.0.53:53"


def _split_domain(image: str) -> tuple[str | None, str]:
    """normalize.go splitDockerDomain: the first component is a registry when it has a dot
    or a port, or is localhost."""
    first, sep, rest = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return None, image


def invalid_name(image: str) -> str | None:
    """The kubelet's message when `image` does not parse (None: it does)."""
    domain, remainder = _split_domain(image)
    name = remainder.split("@", 1)[0].rsplit(":", 1)[0] if remainder else ""
    why = None
    if name and name != name.lower():
        why = "invalid reference format: repository name must be lowercase"
    else:
        m = _REFERENCE.fullmatch(image)
        if m is None:
            why = "invalid reference format"
        elif len((m["domain"] + "/" if m["domain"] else "") + m["path"]) > NAME_TOTAL_LENGTH_MAX:
            why = "repository name must not be more than 255 characters"
    if why is None:
        return None
    return (f'Failed to apply default image tag "{image}": couldn\'t parse image reference '
            f'"{image}": {why}')


def unresolvable(image: str) -> str | None:
    """containerd's error for a registry under .invalid (None: another registry)."""
    domain, remainder = _split_domain(image)
    host = (domain or "").split(":", 1)[0].lower()
    if not (host == "invalid" or host.endswith(".invalid")):
        return None
    path, at, digest = remainder.partition("@")
    repo, colon, tag = path.rpartition(":") if ":" in path else (path, "", "")
    reference = digest if at else (tag if colon else "latest")
    full = image if (at or colon) else f"{image}:latest"
    return (f'rpc error: code = Unknown desc = failed to pull and unpack image "{full}": '
            f'failed to resolve reference "{full}": failed to do request: Head '
            f'"https://{domain}/v2/{repo}/manifests/{reference}": dial tcp: lookup {host} on '
            f"{NODE_RESOLVER}: no such host")
