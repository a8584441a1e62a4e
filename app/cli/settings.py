"""Service configuration: command-line flags with DRA_BRIDGE_* environment fallbacks."""

from __future__ import annotations

import os
from dataclasses import dataclass


def env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"DRA_BRIDGE_{name.upper().replace('-', '_')}", default)


@dataclass
class ServeSettings:
    host: str = "0.0.0.0"
    port: int = 8443
    tls_cert: str = "certs/tls.crt"
    tls_key: str = "certs/tls.key"
    client_ca: str | None = None
    policy: str | None = None
    inventory: str | None = None  # None: bundled example; "live"; or a file
    kubeconfig: str | None = None
    log_format: str = "text"
    log_level: str = "info"
    api_timeout_s: float = 2.0
    reload_interval_s: float = 5.0
