"""Connection bounds below the app, in uvicorn's h11 protocol: header and body read time, and the
number of open connections per client address and in all.

uvicorn closes an idle keep-alive connection, but not a connection that never sends a byte, nor one
whose request line and headers never end: each holds a file descriptor for as long as the client
likes, and a thousand of them starve every other client (and the sandbox's pipes) of descriptors.
:func:`guarded_h11` makes a protocol class for ``uvicorn.Config(http=...)`` that

- answers 408 and closes a connection whose request line and headers are not complete
  ``header_timeout_s`` after it opened (or after the first byte of a later request on it);
- closes a connection whose body is still arriving ``body_timeout_s`` (plus a second's grace, so
  the app's own 408 from :mod:`.middleware` comes first when it is reading) after the headers ended;
- refuses a connection over ``max_connections_per_address`` from its address with 503 and
  ``Retry-After``, and closes it (a trusted proxy's own address is counted only in the total: it
  carries many clients);
- at ``max_connections`` open in all, closes (408) the connection that has waited longest for its
  request's headers to make room for the new one, and refuses (503) only when every open connection
  is past its headers. Clients that hold connections without finishing a request (from however many
  addresses) then only churn among themselves: a new client's headers arrive in milliseconds, long
  before hundreds of later connections push it out.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from minicache.server.config import ServerConfig
from minicache.server.forwarded import TrustedProxies

log = logging.getLogger("minicache.server")
BODY_GRACE_S = 1.0


@dataclass
class ConnectionCount:
    """Open connections in all and per address, and those waiting for a request's headers, oldest
    first (only touched on the event loop)."""

    limit: int
    per_address: int
    exempt: TrustedProxies
    total: int = 0
    by_address: dict[str, int] = field(default_factory=dict)
    waiting: dict[GuardedH11Protocol, None] = field(
        default_factory=dict
    )  # insertion order: oldest first
    refused: int = 0
    evicted: int = 0

    def admit(self, address: str) -> str | None:
        """Count a new connection, or say why it is refused (see the module docstring)."""
        if not self.exempt.trusts(address) and self.by_address.get(address, 0) >= self.per_address:
            return (
                f"This address has its limit of {self.per_address} connections open; retry shortly."
            )
        if self.total >= self.limit:
            if not self.waiting:
                return f"The server has its limit of {self.limit} connections open; retry shortly."
            oldest = next(iter(self.waiting))
            self.evicted += 1
            oldest.evict()  # releases its count at once
        self.total += 1
        self.by_address[address] = self.by_address.get(address, 0) + 1
        return None

    def release(self, address: str) -> None:
        self.total -= 1
        left = self.by_address.pop(address) - 1
        if left:
            self.by_address[address] = left


def _raw_response(status: int, reason: str, message: str, code: str, retry: bool) -> bytes:
    """A whole HTTP/1.1 response with an OpenAI-style error body, for a connection about to close."""
    body = json.dumps(
        {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": None,
                "code": code,
            }
        }
    ).encode()
    head = [
        f"HTTP/1.1 {status} {reason}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
    ]
    if retry:
        head.append("retry-after: 1")
    return ("\r\n".join(head) + "\r\n\r\n").encode("ascii") + body


def guarded_h11(config: ServerConfig) -> type[H11Protocol]:
    """A protocol class whose connections share one :class:`ConnectionCount` (one per server)."""
    count = ConnectionCount(
        config.max_connections,
        config.max_connections_per_address,
        TrustedProxies(config.trusted_proxies),
    )
    return type(
        "GuardedH11Protocol",
        (GuardedH11Protocol,),
        {
            "count": count,
            "header_timeout_s": config.header_timeout_s,
            "body_timeout_s": config.body_timeout_s + BODY_GRACE_S,
        },
    )


class GuardedH11Protocol(H11Protocol):
    count: ConnectionCount
    header_timeout_s: float
    body_timeout_s: float

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._address: str | None = None  # set while this connection is counted
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        address = self.client[0] if self.client else "unknown"
        refused = self.count.admit(address)
        if refused is not None:
            self.count.refused += 1
            transport.write(_raw_response(503, "Service Unavailable", refused, "overloaded", True))
            transport.close()
            return
        self._address = address
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._address is not None:
            self.count.release(self._address)
            self._address = None
        self._cancel_timers()
        super().connection_lost(exc)

    def _should_upgrade(self) -> bool:
        """Never: the app serves no WebSocket, and an upgraded connection would be handed to another
        protocol object, whose close this count would never hear of. The request is served as
        plain HTTP (``Upgrade`` ignored), quietly: a client must not be able to fill the log."""
        return False

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE and self._header_timer is None:
            self._arm_header_timer()  # the first byte of a later request on a kept-alive connection
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        state = self.conn.their_state
        if state is h11.IDLE:
            if self.conn.trailing_data[0] and self._header_timer is None:
                self._arm_header_timer()  # part of a pipelined request waits in the buffer
            return
        self._cancel_header_timer()
        if state is h11.SEND_BODY:
            if self._body_timer is None:
                self._body_timer = self.loop.call_later(self.body_timeout_s, self._body_timeout)
        elif self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    # -- timers -------------------------------------------------------------------------------------
    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._header_timeout)
        self.count.waiting[self] = None

    def _cancel_header_timer(self) -> None:
        self.count.waiting.pop(self, None)
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _cancel_timers(self) -> None:
        self._cancel_header_timer()
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _header_timeout(self) -> None:
        self._header_timer = None
        self.count.waiting.pop(self, None)
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a response is still being written; its own request had complete headers
        message = f"The request headers did not arrive within {self.header_timeout_s:g} s."
        self.transport.write(
            _raw_response(408, "Request Timeout", message, "request_timeout", False)
        )
        self.transport.close()

    def evict(self) -> None:
        """Make room for a new connection: this one has waited longest for its headers."""
        self._cancel_timers()
        if self._address is not None:
            self.count.release(self._address)
            self._address = None
        message = "The server is at its connection limit and the request headers had not arrived."
        self.transport.write(
            _raw_response(408, "Request Timeout", message, "request_timeout", False)
        )
        self.transport.close()

    def _body_timeout(self) -> None:
        self._body_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.SEND_BODY:
            return
        if self.cycle is not None and not self.cycle.response_started:
            message = f"The request body did not arrive within {self.body_timeout_s:g} s."
            self.transport.write(
                _raw_response(408, "Request Timeout", message, "request_timeout", False)
            )
            self.cycle.disconnected = True  # the app's later sends are dropped, not written
        self.transport.close()


def uvicorn_options(config: ServerConfig) -> dict[str, Any]:
    """The options uvicorn needs to serve with these bounds: the guarded protocol, and uvicorn's
    own ``X-Forwarded-For`` handling off (it trusts loopback by default; :mod:`.forwarded` decides
    instead, from ``trusted_proxies``)."""
    return {"http": guarded_h11(config), "ws": "none", "proxy_headers": False}
