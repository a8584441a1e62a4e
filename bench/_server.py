"""Bench server: the real webhook app plus /echo (same parse and reply, no planning)."""

import contextlib
import os
import pathlib
import ssl
import subprocess
import sys
import tempfile
import time

import httpx
import orjson
import uvicorn
from fastapi import Request
from fastapi.responses import Response

from app import kube
from app.cli import load_inventory
from app import certs
from app.server import Metrics, PolicyHolder, ServiceState, admission, create_app, read_body, tls


def main(port: int, cert: str, key: str) -> None:
    metrics = Metrics()
    state = ServiceState(policy=PolicyHolder(None, metrics), templates=kube.TemplateStore(None),
                         namespace_labels=kube.NamespaceLabels(None), metrics=metrics, inventory=load_inventory(None))
    app = create_app(state)

    @app.post("/echo")
    async def echo(request: Request) -> Response:
        req = admission.parse_review(await read_body(request))
        return Response(orjson.dumps(admission.response(req.uid, True)), media_type="application/json")

    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", ssl_certfile=cert,
                            ssl_keyfile=key, access_log=False, timeout_graceful_shutdown=1)
    config.load()
    context = tls.server_context()
    context.load_cert_chain(cert, key)
    config.ssl = context
    uvicorn.Server(config).run()


@contextlib.contextmanager
def running():
    """Start this server in a subprocess over fresh TLS certificates: yields (url, ca_path, process)."""
    bundle = certs.write_bundle(tempfile.mkdtemp(), ["localhost", "127.0.0.1"])
    port = 18000 + os.getpid() % 2000
    proc = subprocess.Popen([sys.executable, __file__, str(port), bundle.cert, bundle.key],
                            cwd=pathlib.Path(__file__).resolve().parents[1])
    url = f"https://localhost:{port}"
    try:
        for _ in range(100):
            try:
                httpx.get(url + "/healthz", verify=ssl.create_default_context(cafile=bundle.ca_cert))
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield url, bundle.ca_cert, proc
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3])
