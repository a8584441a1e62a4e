"""Certificates for the webhook: a CA and a serving certificate for its Service's names, written
atomically with private modes (`dra-bridge certs`, and development certificates for `serve`)."""

from .bundle import Bundle, ensure_dev_certs, generate, service_hosts, write_bundle

__all__ = ["Bundle", "ensure_dev_certs", "generate", "service_hosts", "write_bundle"]
