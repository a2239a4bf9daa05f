"""What web_fetch may connect to: public addresses, and the ones `tools.web.allow_private` names.

`refusal` classifies one address. An IPv6 address that carries an IPv4 one (IPv4-mapped,
IPv4-compatible, 6to4, NAT64) is judged by the IPv4 address inside, so `::ffff:127.0.0.1`
is loopback, not "global IPv6".

`GuardedResolver` is the DNS resolver of web_fetch's aiohttp connector: every address of
every answer is checked, and aiohttp connects to the very addresses it returned. A name
whose answer changes between a check and the connection (DNS rebinding) therefore cannot
slip through: there is no second lookup. Hosts written as IP literals never reach a
resolver in aiohttp, so `check_literal` covers them before each request.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from clawgate.kernel.errors import ToolError

if TYPE_CHECKING:
    from aiohttp.abc import AbstractResolver, ResolveResult

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")


class AddressRefused(OSError):
    """A host resolved to an address web_fetch may not reach. An OSError, so aiohttp's
    connector passes it on as the cause of its connection error."""


def embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for, if any."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or (address in _IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _kind(address: Address) -> str | None:
    """Why an address is not public, or None when it is."""
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"  # 169.254.169.254, the cloud metadata service, is one
    if address.is_multicast:
        return "multicast"
    if address.is_private:
        return "private"
    if address.is_reserved or not address.is_global:
        return "reserved"
    return None


def refusal(address: Address, allowed: Sequence[Network] = ()) -> str | None:
    """Why web_fetch may not reach `address` (one phrase), or None when it may: a public
    address, or one inside a network of `allowed`."""
    inner = embedded_ipv4(address)
    judged = inner if inner is not None else address
    if any(judged.version == net.version and judged in net for net in allowed):
        return None
    if any(address.version == net.version and address in net for net in allowed):
        return None
    kind = _kind(judged)
    if kind is None:
        return None
    return f"{address} is {'an' if kind[0] in 'aeiou' else 'a'} {kind} address"


def check(host: str, addresses: Iterable[str], allowed: Sequence[Network]) -> None:
    """Raise AddressRefused unless every address `host` resolved to may be reached."""
    for text in addresses:
        reason = refusal(ipaddress.ip_address(text.split("%", 1)[0]), allowed)
        if reason is not None:
            raise AddressRefused(
                f"{host}: {reason}, not fetched (allow it with tools.web.allow_private)"
            )


def check_literal(host: str, allowed: Sequence[Network]) -> None:
    """A host written as an IP address is checked here: aiohttp does not resolve it."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return
    try:
        check(host, [str(address)], allowed)
    except AddressRefused as exc:
        raise ToolError(f"{exc}") from None


def make_resolver(
    allowed: Sequence[Network],
    trusted_hosts: Iterable[str] = (),
    inner: AbstractResolver | None = None,
) -> AbstractResolver:
    """A GuardedResolver over `inner` (aiohttp's threaded resolver by default). Hosts in
    `trusted_hosts` (the configured proxy's) are resolved unchecked."""
    from aiohttp import ThreadedResolver
    from aiohttp.abc import AbstractResolver

    class GuardedResolver(AbstractResolver):
        def __init__(self) -> None:
            self._inner = inner or ThreadedResolver()
            self._trusted = {h.lower() for h in trusted_hosts}

        async def resolve(
            self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
        ) -> list[ResolveResult]:
            answer = await self._inner.resolve(host, port, family)
            if host.lower() not in self._trusted:
                check(host, [entry["host"] for entry in answer], allowed)
            return answer

        async def close(self) -> None:
            await self._inner.close()

    return GuardedResolver()
