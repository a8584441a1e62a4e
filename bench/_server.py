"""Bench server: the real webhook app plus /echo (same parse and reply, no planning)."""

import sys

import orjson
import uvicorn
from fastapi import Request
from fastapi.responses import Response

from app import admission, kube, tls
from app.inventory import load_example
from app.metrics import Metrics
from app.service import PolicyHolder, ServiceState
from app.webhook import create_app, read_body


def main(port: int, cert: str, key: str) -> None:
    metrics = Metrics()
    state = ServiceState(policy=PolicyHolder(None, metrics), templates=kube.TemplateStore(None),
                         namespace_labels=kube.NamespaceLabels(None), metrics=metrics, inventory=load_example())
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


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3])
