"""Kubernetes' URL library: url(s), isURL(s) and the URL accessors."""

from __future__ import annotations

import re

from ..values import URL
from .decl import function, method

DECLARATIONS = [
    function("url", ("string",), "URL"), function("isURL", ("string",), "bool"),
    *[method(name, "URL", (), "string") for name in ("getScheme", "getHost", "getHostname", "getPort",
                                                      "getEscapedPath")],
    method("getQuery", "URL", (), "map(string, list(string))"),
]
_URL = re.compile(r"^(?:([A-Za-z][A-Za-z0-9+.-]*):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$")


def _parse(text):
    match = _URL.match(text) if isinstance(text, str) else None
    if not match or not match[1] and not text.startswith("/"):
        raise ValueError(f"{text!r} is not a URL")
    return match


def _url(text):
    _parse(text)
    return {URL: text}


def _is_url(text) -> bool:
    try:
        _parse(text)
        return True
    except ValueError:
        return False


def _part(index):
    return lambda url: _parse(url[URL])[index] or ""


def _host(url, with_port: bool):
    authority = (_parse(url[URL])[2] or "").rsplit("@", 1)[-1]
    if authority.startswith("["):
        host = authority[1:].partition("]")[0]
        return authority if with_port else host
    host, _, port = authority.partition(":")
    return port if with_port else host


def _query(url) -> dict:
    out: dict = {}
    for part in filter(None, (_parse(url[URL])[4] or "").split("&")):
        key, _, value = part.partition("=")
        out.setdefault(key, []).append(value)
    return out


FUNCTIONS = {
    "url": _url, "isURL": _is_url, "getScheme": _part(1), "getEscapedPath": _part(3), "getQuery": _query,
    "getHost": lambda url: (_parse(url[URL])[2] or "").rsplit("@", 1)[-1],
    "getHostname": lambda url: _host(url, False), "getPort": lambda url: _host(url, True),
}
