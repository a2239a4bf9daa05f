"""Outgoing HTTP's two settings taken from the environment, the same for every client of
ours: which proxy a URL goes through, and which certificate authorities are trusted."""

from __future__ import annotations

import functools
import os
import ssl
import urllib.parse
import urllib.request


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for `url` (http_proxy, https_proxy, all_proxy, less
    no_proxy), read at each call as httpx did. Not aiohttp's trust_env: that re-reads
    the environment and ~/.netrc in a worker thread on every request, two thread hops."""
    proxies = urllib.request.getproxies_environment()
    parts = urllib.parse.urlsplit(url)
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    # With a proxy in the environment, proxy_bypass reads no_proxy (never the OS settings).
    if not proxy or not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return proxy


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's trust: the CA bundle named by SSL_CERT_FILE / SSL_CERT_DIR (which OpenSSL
    reads by itself), else certifi's, not the system store aiohttp would default to."""
    if os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context()
    import certifi

    return ssl.create_default_context(cafile=certifi.where())
