"""HTTP protocol with read deadlines: uvicorn times out idle keep-alive connections only after
a first response, so a connection that never sends (or trickles) headers or a body would stay
open for ever. Each request must arrive whole within the header and body deadlines."""

from __future__ import annotations

import asyncio.sslproto
import logging

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger("dra_bridge.http")
# asyncio gives every TLS connection a 256 KiB read buffer (2,000 idle connections: 545 MB).
# TLS records are at most 16 KiB: 32 KiB reads them whole.
TLS_READ_BUFFER = 32 * 1024


def small_tls_buffers() -> None:
    if getattr(asyncio.sslproto.SSLProtocol, "max_size", 0) > TLS_READ_BUFFER:
        asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BUFFER


class DeadlineHttpProtocol(HttpToolsProtocol):
    header_timeout_s = 10.0  # connection opened (or request begun) -> headers complete
    body_timeout_s = 10.0  # headers complete -> body complete
    max_connections = 1000  # open connections; more are closed as they arrive

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self._guard = None
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            log.warning("connection limit (%d) reached: closing a new connection", self.max_connections)
            transport.close()
            return
        self._arm(self.header_timeout_s)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm(self.header_timeout_s)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm(self.body_timeout_s)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._guard = self.loop.call_later(seconds, self._expire)

    def _disarm(self) -> None:
        if getattr(self, "_guard", None) is not None:
            self._guard.cancel()
            self._guard = None

    def _expire(self) -> None:
        self._guard = None
        if not self.transport.is_closing():
            self.transport.close()  # incomplete request: no answer is owed
