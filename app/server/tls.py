"""The server TLS context, and the certificate files it serves, reloaded when they are rotated
(app.certs makes them)."""

from __future__ import annotations

import logging
import os
import ssl

from cryptography import x509

log = logging.getLogger("dra_bridge.tls")

# Forward-secret AEAD suites only for TLS 1.2; TLS 1.3 suites are strong by construction.
CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"


def server_context(client_ca: str | None = None) -> ssl.SSLContext:
    """TLS 1.2+, forward-secret AEAD ciphers; client certificates required when client_ca is set."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(CIPHERS)
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    if client_ca:
        ctx.load_verify_locations(client_ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


class CertReloader:
    """Keeps the served certificate in step with files on disk, without a restart.

    Each change is loaded into a new context; only a pair that loads (certificate and key
    match) replaces the current one, which new handshakes switch to from the listening
    context's SNI callback. A missing, half-written or mismatched pair (a tool that writes the
    certificate before the key) keeps the last good one serving.
    """

    def __init__(self, context: ssl.SSLContext, cert_path: str, key_path: str, client_ca: str | None = None):
        self.context, self.cert_path, self.key_path = context, cert_path, key_path
        self.client_ca = client_ca
        self.current: ssl.SSLContext | None = None
        context.sni_callback = self._select
        self._stamp: tuple | None = None
        self.loaded = False
        self.last_error: str | None = None
        self.reloads = 0
        self.not_after: float | None = None  # the serving certificate's expiry (Unix seconds)

    def _current_stamp(self) -> tuple | None:
        try:
            a, b = os.stat(self.cert_path), os.stat(self.key_path)
        except OSError:
            return None
        return (a.st_mtime_ns, a.st_size, b.st_mtime_ns, b.st_size)

    def check(self) -> bool:
        """Reload when the files changed; True when a new certificate was loaded."""
        stamp = self._current_stamp()
        if stamp is None:
            if self.last_error is None:
                self.last_error = f"certificate files missing: {self.cert_path}, {self.key_path}"
                log.warning("%s; keeping the certificate in use", self.last_error)
            return False
        if stamp == self._stamp:
            return False
        fresh = server_context(self.client_ca)
        try:
            fresh.load_cert_chain(self.cert_path, self.key_path)
        except (ssl.SSLError, OSError) as exc:
            self.last_error = f"cannot load certificate: {exc}"
            log.warning("%s; keeping the certificate in use", self.last_error)
            return False
        if self.current is None:
            self.context.load_cert_chain(self.cert_path, self.key_path)  # the listening context's own
        self.current = fresh
        self._stamp, self.loaded, self.last_error = stamp, True, None
        self.not_after = _not_after(self.cert_path)
        self.reloads += 1
        log.info("loaded serving certificate %s", self.cert_path)
        return True

    def _select(self, ssl_object, _server_name, _context) -> None:
        if self.current is not None:
            ssl_object.context = self.current  # the last pair that loaded whole


def _not_after(cert_path: str) -> float | None:
    """When the leaf certificate of a PEM file (the first one) expires; None if unreadable (it
    just loaded, so a race with a rotation at most)."""
    try:
        with open(cert_path, "rb") as handle:
            return x509.load_pem_x509_certificate(handle.read()).not_valid_after_utc.timestamp()
    except (OSError, ValueError):
        return None
