"""Which proxy a request to the API server goes through, decided as kubectl decides it: the
cluster's proxy-url, else Go's net/http ProxyFromEnvironment, which is
golang.org/x/net/http/httpproxy (proxy.go: FromEnvironment, parseProxy, useProxy and the
NO_PROXY matchers in config.init). Ported rule for rule, so that a NO_PROXY written for
kubectl sends hvdk8s direct exactly where kubectl goes direct:

- HTTPS_PROXY (https_proxy) for https servers, HTTP_PROXY (http_proxy) for http ones; the
  upper-case name first; an empty value is unset.
- A value without a scheme is an http proxy (`proxy:3128` -> `http://proxy:3128`).
- Never for `localhost` or a loopback address (but `x.localhost` is proxied).
- NO_PROXY, comma-separated, case-insensitive: `*` (nothing is proxied); an IP address, with
  an optional port (`1.2.3.4`, `1.2.3.4:80`, `[::1]:443`); a CIDR (`10.0.0.0/8`); a domain,
  with an optional port, matching itself and its subdomains (`corp.example`), only its
  subdomains with a leading dot (`.corp.example`), or, written `*.corp.example`, as the
  leading dot. Malformed entries are skipped.
- HTTP_PROXY is refused in a CGI environment (REQUEST_METHOD set), where a request header
  could have set it (golang.org/s/cgihttpproxy).
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from urllib.parse import urlsplit

from launcher.errors import UsageError

_PORTS = {"http": "80", "https": "443", "socks5": "1080"}
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Environment:
    """The proxy variables, as FromEnvironment reads them."""

    http_proxy: str = ""
    https_proxy: str = ""
    no_proxy: str = ""
    cgi: bool = False

    @classmethod
    def read(cls) -> Environment:
        def any_of(*names: str) -> str:
            return next((os.environ[n] for n in names if os.environ.get(n)), "")

        return cls(any_of("HTTP_PROXY", "http_proxy"), any_of("HTTPS_PROXY", "https_proxy"),
                   any_of("NO_PROXY", "no_proxy"), bool(os.environ.get("REQUEST_METHOD")))


def parse_proxy(value: str) -> str | None:
    """The proxy URL a variable's value means (parseProxy: a value that is not an
    http/https/socks5 URL is tried again with `http://` before it)."""
    if not value:
        return None
    scheme = urlsplit(value).scheme if "://" in value else ""
    if scheme in ("http", "https", "socks5"):
        return value
    if "://" in value:  # another scheme: Go keeps it, and the dial then fails on it
        return value
    return "http://" + value


def _split_host_port(text: str) -> tuple[str, str] | None:
    """net.SplitHostPort: (host, port) of `host:port` or `[v6]:port`, else None."""
    if text.startswith("["):
        end = text.find("]")
        if end < 0 or text[end + 1:end + 2] != ":":
            return None
        return text[1:end], text[end + 2:]
    if text.count(":") != 1:
        return None
    host, _, port = text.partition(":")
    return host, port


def _ip(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class NoProxy:
    """NO_PROXY parsed into its matchers (config.init)."""

    everything: bool
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
    addresses: tuple[tuple[IPAddress, str], ...]  # (address, port or "")
    domains: tuple[tuple[str, str, bool], ...]  # (".suffix", port or "", matches the bare name)

    @classmethod
    def parse(cls, text: str) -> NoProxy:
        networks, addresses, domains = [], [], []
        for entry in text.split(","):
            entry = entry.strip().lower()
            if not entry:
                continue
            if entry == "*":
                return cls(True, (), (), ())
            if "/" in entry:
                try:
                    networks.append(ipaddress.ip_network(entry, strict=False))
                    continue
                except ValueError:
                    pass
            split = _split_host_port(entry)
            host, port = split if split is not None else (entry, "")
            if not host:
                continue  # ":1": no host, malformed
            address = _ip(host)
            if address is not None:
                addresses.append((address, port))
                continue
            if host.startswith("*."):
                host = host[1:]
            bare = not host.startswith(".")
            suffix = "." + host if bare else host
            domains.append((_idna(suffix), port, bare))
        return cls(False, tuple(networks), tuple(addresses), tuple(domains))

    def use_proxy(self, host: str, port: str) -> bool:
        """useProxy: whether a request to host:port goes through the proxy."""
        host = host.lower().strip()
        if host == "localhost":
            return False
        zoned = "%" in host
        if zoned:  # an IPv6 zone (`[fe80::1%25eth0]`) never matches a NO_PROXY domain: the
            # fix of CVE-2025-22870 in golang.org/x/net, whose test has `1000::%25.example.com`
            host = host.partition("%")[0]
        address = _ip(host)
        if address is not None and address.is_loopback:
            return False
        if self.everything:
            return False
        if address is not None:
            if any(address in net for net in self.networks):
                return False
            if any(address == a and p in ("", port) for a, p in self.addresses):
                return False
        if zoned:
            return True
        return not any((host.endswith(suffix) or (bare and host == suffix[1:]))
                       and p in ("", port) for suffix, p, bare in self.domains)


def _idna(name: str) -> str:
    if name.isascii():
        return name
    try:
        return ".".join(label.encode("idna").decode() if label else "" for label in
                        name.split("."))
    except UnicodeError:
        return name


def proxy_from_environment(url: str, env: Environment | None = None) -> str | None:
    """ProxyFromEnvironment for a request to `url`: the proxy URL, or None (direct)."""
    env = env or Environment.read()
    parts = urlsplit(url)
    if parts.scheme == "https":
        proxy = parse_proxy(env.https_proxy)
    elif parts.scheme == "http":
        proxy = parse_proxy(env.http_proxy)
        if proxy and env.cgi:
            raise UsageError("refusing to use HTTP_PROXY value in CGI environment (REQUEST_"
                             "METHOD is set); see golang.org/s/cgihttpproxy")
    else:
        proxy = None
    if not proxy:
        return None
    host = _idna(parts.hostname or "")
    port = str(parts.port) if parts.port else _PORTS.get(parts.scheme, "")
    return proxy if NoProxy.parse(env.no_proxy).use_proxy(host, port) else None


def proxy_for(server: str, cluster: dict) -> str | None:
    """The proxy requests to `server` go through: the cluster's proxy-url (for every
    host, as client-go's http.ProxyURL), else the environment's."""
    if cluster.get("proxy-url"):
        return str(cluster["proxy-url"])
    return proxy_from_environment(server)
