"""HTTP protocol with read deadlines: uvicorn times out idle keep-alive connections only after
a first response, so a connection that never sends (or trickles) headers or a body would stay
open for ever. Each request must arrive whole within the header and body deadlines."""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class DeadlineHttpProtocol(HttpToolsProtocol):
    header_timeout_s = 10.0  # connection opened (or request begun) -> headers complete
    body_timeout_s = 10.0  # headers complete -> body complete

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self._guard = None
        super().connection_made(transport)
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
