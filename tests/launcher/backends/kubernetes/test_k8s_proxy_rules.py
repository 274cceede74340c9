"""Go's proxy choice (golang.org/x/net/http/httpproxy), with its published test table
(http/httpproxy/proxy_test.go: proxyForURLTests, UseProxyTests, TestInvalidNoProxy,
TestAllNoProxy), run against hvdk8s's port of it. kubectl decides with that code, so a
NO_PROXY written for kubectl must send hvdk8s direct exactly where kubectl goes direct.

The rows that test Go-only behaviour are left out: the CGI row whose answer is an error
value (here a UsageError, asserted separately) and the `ftp://` request (the API server
is http or https)."""

from __future__ import annotations

import pytest

from launcher.backends.kubernetes.httpproxy import Environment, NoProxy, proxy_from_environment
from launcher.errors import UsageError

# (HTTP_PROXY, HTTPS_PROXY, NO_PROXY, request URL ("" = http://example.com), expected proxy)
PROXY_FOR_URL = [
    ("127.0.0.1:8080", "", "", "", "http://127.0.0.1:8080"),
    ("cache.corp.example.com:1234", "", "", "", "http://cache.corp.example.com:1234"),
    ("cache.corp.example.com", "", "", "", "http://cache.corp.example.com"),
    ("localhost", "", "", "", "http://localhost"),  # a single label
    ("https://cache.corp.example.com", "", "", "", "https://cache.corp.example.com"),
    ("http://127.0.0.1:8080", "", "", "", "http://127.0.0.1:8080"),
    ("https://127.0.0.1:8080", "", "", "", "https://127.0.0.1:8080"),
    ("socks5://127.0.0.1", "", "", "", "socks5://127.0.0.1"),
    ("foo://host", "", "", "", "foo://host"),  # unknown schemes are kept
    ("http.proxy.tld", "secure.proxy.tld", "", "http://insecure.tld/", "http://http.proxy.tld"),
    ("http.proxy.tld", "secure.proxy.tld", "", "https://secure.tld/", "http://secure.proxy.tld"),
    ("http.proxy.tld", "https://secure.proxy.tld", "", "https://secure.tld/",
     "https://secure.proxy.tld"),
    ("http.proxy.tld", "", "", "https://secure.tld/", None),
    ("", "", "", "", None),
    ("proxy", "", "example.com", "http://example.com/", None),
    ("proxy", "", ".example.com", "http://example.com/", "http://proxy"),
    ("proxy", "", "ample.com", "http://example.com/", "http://proxy"),
    ("proxy", "", "example.com", "http://foo.example.com/", None),
    ("proxy", "", ".foo.com", "http://example.com/", "http://proxy"),
    ("proxy", "", ".示例.com", "http://www.示例.com", None),
    ("proxy", "", "xn--fsq092h.com", "http://www.示例.com", None),
    ("proxy", "", "示例.com", "http://www.xn--fsq092h.com", None),
    ("proxy", "", "example.com", "http://[1000::%25.example.com]:123", "http://proxy"),
]


@pytest.mark.parametrize("http, https, no_proxy, url, expected", PROXY_FOR_URL)
def test_go_proxy_for_url_table(http, https, no_proxy, url, expected):
    env = Environment(http_proxy=http, https_proxy=https, no_proxy=no_proxy)
    assert proxy_from_environment(url or "http://example.com", env) == expected


def test_https_proxy_is_still_used_in_a_cgi_environment_but_http_proxy_is_refused():
    env = Environment(https_proxy="https://secure.proxy.tld", cgi=True)
    assert proxy_from_environment("https://secure.tld/", env) == "https://secure.proxy.tld"
    with pytest.raises(UsageError, match="refusing to use HTTP_PROXY value in CGI"):
        proxy_from_environment("http://example.com",
                               Environment(http_proxy="http://10.1.2.3:8080", cgi=True))


GO_NO_PROXY = ("foobar.com, .barbaz.net, *.wildcard.io, 192.168.1.1, 192.168.1.2:81, "
               "192.168.1.3:80, 10.0.0.0/30, 2001:db8::52:0:1, [2001:db8::52:0:2]:443, "
               "[2001:db8::52:0:3]:80, 2002:db8:a::45/64")
# (host, whether a request to host:80 goes through the proxy)
USE_PROXY = [
    ("localhost", False), ("127.0.0.1", False), ("127.0.0.2", False), ("[::1]", False),
    ("[::2]", True),
    ("192.168.1.1", False), ("192.168.1.2", True), ("192.168.1.3", False),
    ("192.168.1.4", True), ("10.0.0.2", False), ("[2001:db8::52:0:1]", False),
    ("[2001:db8::52:0:2]", True), ("[2001:db8::52:0:3]", False), ("[2002:db8:a::123]", False),
    ("[fe80::424b:c8be:1643:a1b6]", True),
    ("barbaz.net", True), ("www.barbaz.net", False), ("foobar.com", False),
    ("www.foobar.com", False), ("foofoobar.com", True), ("baz.com", True),
    ("localhost.net", True), ("local.localhost", True), ("barbarbaz.net", True),
    ("wildcard.io", True), ("nested.wildcard.io", False), ("awildcard.io", True),
]


@pytest.mark.parametrize("host, proxied", USE_PROXY)
def test_go_use_proxy_table(host, proxied):
    assert NoProxy.parse(GO_NO_PROXY).use_proxy(host.strip("[]"), "80") is proxied


@pytest.mark.parametrize("host, _", USE_PROXY)
def test_go_no_proxy_star_matches_everything(host, _):
    assert NoProxy.parse("*").use_proxy(host.strip("[]"), "80") is False


def test_go_invalid_no_proxy_entry_is_skipped():
    assert NoProxy.parse(":1").use_proxy("example.com", "80") is True
