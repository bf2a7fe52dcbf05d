"""The client's address: the TCP peer, or, only when that peer is a configured proxy, the rightmost
address in ``X-Forwarded-For`` that is not itself a trusted proxy.

Anyone can send ``X-Forwarded-For``; believing it from any peer lets one client pose as many (and so
escape the failed-key throttle and the per-address limits). Only a proxy the operator named appends
a hop that can be believed, and only the hops it and the trusted proxies behind it appended: the
entries left of the first untrusted one were written by the client. With no trusted proxies (the
default) the header is ignored.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class TrustedProxies:
    def __init__(self, proxies: Iterable[str]) -> None:
        self.networks: tuple[Network, ...] = tuple(
            ipaddress.ip_network(p.strip(), strict=False) for p in proxies
        )

    def __bool__(self) -> bool:
        return bool(self.networks)

    def trusts(self, address: str) -> bool:
        if not self.networks:
            return False
        try:
            ip = ipaddress.ip_address(address.strip().strip("[]"))
        except ValueError:
            return False
        return any(ip.version == net.version and ip in net for net in self.networks)

    def client(self, peer: str, forwarded_for: Iterable[bytes]) -> str:
        """The client behind ``peer`` given the request's ``X-Forwarded-For`` header values."""
        if not self.trusts(peer):
            return peer
        hops = [h.strip() for value in forwarded_for for h in value.decode("latin-1").split(",")]
        client = peer
        for hop in reversed(hops):
            try:
                hop = str(ipaddress.ip_address(hop.strip("[]")))
            except ValueError:
                return client  # a hop that is no address: stop at the last one that was believed
            client = hop
            if not self.trusts(hop):
                return hop
        return client

    def resolve(self, scope: dict[str, Any]) -> dict[str, Any]:
        """``scope`` with its ``client`` set to the resolved client (the same scope if unchanged)."""
        peer = scope.get("client")
        if not self.networks or not peer or not self.trusts(peer[0]):
            return scope
        values = [v for k, v in scope.get("headers") or [] if k == b"x-forwarded-for"]
        client = self.client(peer[0], values)
        return scope if client == peer[0] else {**scope, "client": (client, 0)}
