"""A Service in front of webhook replicas, as kube-proxy makes one: each new TCP connection goes
to a ready endpoint (round robin), and an established connection stays with its backend until
either side closes it (conntrack), whatever happens to the endpoints meanwhile. Endpoints follow
each backend's /readyz, probed every `period_s` (the readiness probe, then the EndpointSlice
update). TLS passes through: the API server talks to the replicas themselves."""

from __future__ import annotations

import asyncio
import ssl
import threading
import urllib.request
from collections import Counter

from tests.e2e.cluster import free_port


class Balancer:
    def __init__(self, ca_cert: str, period_s: float = 1.0):
        self.port = free_port()
        self.period_s = period_s
        self.backends: list[int] = []  # replica ports, in the order added
        self.ready: list[int] = []  # the endpoints: backends whose /readyz said 200 last time
        self.connections = Counter()  # backend -> connections opened to it
        self.no_endpoint = 0  # connections that found no ready endpoint
        self.refused = 0  # connections a ready endpoint's backend refused (it stopped listening)
        self._context = ssl.create_default_context(cafile=ca_cert)
        self._next = 0
        self._loop = asyncio.new_event_loop()
        self._stop = threading.Event()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def add(self, port: int) -> None:
        self.backends.append(port)

    def remove(self, port: int) -> None:
        self.backends = [p for p in self.backends if p != port]

    def start(self) -> "Balancer":
        started = threading.Event()

        def serve():
            asyncio.set_event_loop(self._loop)
            server = self._loop.run_until_complete(asyncio.start_server(self._accept, "127.0.0.1", self.port))
            started.set()
            self._loop.run_until_complete(self._until_stopped())
            server.close()
        threading.Thread(target=serve, name="balancer", daemon=True).start()
        threading.Thread(target=self._probe, name="balancer-probe", daemon=True).start()
        started.wait(10)
        return self

    def stop(self) -> None:
        self._stop.set()

    async def _until_stopped(self) -> None:
        while not self._stop.is_set():
            await asyncio.sleep(0.1)

    def _probe(self) -> None:
        while not self._stop.is_set():
            self.ready = [p for p in list(self.backends) if self._is_ready(p)]
            self._stop.wait(self.period_s)

    def _is_ready(self, port: int) -> bool:
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=self._context, timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        endpoints = list(self.ready)
        if not endpoints:
            self.no_endpoint += 1  # kube-proxy with no endpoints rejects the connection
            writer.close()
            return
        backend = endpoints[self._next % len(endpoints)]
        self._next += 1
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", backend)
        except OSError:
            self.refused += 1
            writer.close()
            return
        self.connections[backend] += 1
        try:
            await asyncio.gather(self._pump(reader, upstream_writer), self._pump(upstream_reader, writer))
        finally:
            writer.close()
            upstream_writer.close()

    @staticmethod
    async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        """Bytes one way until EOF, then a half-close: the other direction goes on."""
        try:
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
            if sink.can_write_eof():
                sink.write_eof()
        except (ConnectionError, OSError):
            sink.close()
