"""`dra-bridge certs`: a CA and serving certificate for the webhook Service; optional caBundle injection."""

from __future__ import annotations

import base64
import os
import re

from app.common import InputError

_CA_BUNDLE = re.compile(r"^(\s*caBundle:).*$", re.MULTILINE)


def run_certs(args) -> int:
    from app.server import tls  # not at import: the other commands need no web stack

    hosts = tls.service_hosts(args.service, args.namespace) + list(args.host)
    bundle = tls.write_bundle(args.out, hosts, args.days)
    print(f"wrote {bundle.ca_cert}, {bundle.cert}, {bundle.key} for {', '.join(hosts)}")
    if args.inject:
        with open(bundle.ca_cert, "rb") as handle:
            ca_b64 = base64.b64encode(handle.read()).decode()
        changed = inject_ca_bundle(args.inject, ca_b64)
        if not changed:
            raise InputError(args.inject, "no webhook configuration with a caBundle field found")
        for path in changed:
            print(f"injected caBundle into {path}")
    return 0


def inject_ca_bundle(folder: str, ca_b64: str) -> list[str]:
    changed = []
    for root, _dirs, files in os.walk(folder):
        for name in sorted(files):
            if not name.endswith((".yaml", ".yml")):
                continue
            path = os.path.join(root, name)
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
            if "WebhookConfiguration" not in text or not _CA_BUNDLE.search(text):
                continue
            new = _CA_BUNDLE.sub(lambda m: f"{m.group(1)} {ca_b64}", text)
            if new != text:
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(new)
                changed.append(path)
    return changed
