"""The smallest useful FastAPI/uvicorn admission webhook: allow, no patch, on /mutate and
/validate. The baseline that bench/e2e_admission.py measures dra-bridge against.
Usage: _echo_webhook.py PORT CERT KEY"""

import json
import sys

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response

app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)


@app.post("/mutate")
@app.post("/validate")
async def review(request: Request) -> Response:
    uid = json.loads(await request.body())["request"]["uid"]
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": uid, "allowed": True}}
    return Response(json.dumps(body), media_type="application/json")


@app.get("/healthz")
async def healthz() -> Response:
    return Response("ok")


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), ssl_certfile=sys.argv[2], ssl_keyfile=sys.argv[3],
                log_level="warning", access_log=False)
