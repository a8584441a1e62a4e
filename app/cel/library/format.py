"""The API server's format library (`format.named(name)`, `format.<name>()`,
`f.validate(s)`): named string formats and their validation errors. validate returns an
optional list of errors, none when the string is valid."""

from __future__ import annotations

import base64
import binascii
import datetime
import re

from ..values import FORMAT as _F
from ..values import optional
from .decl import function, method

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_UUID = re.compile(r"(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def _pattern(regex: re.Pattern, limit: int, what: str, prefix: bool = False):
    def check(s: str) -> list[str]:
        if prefix and s.endswith("-"):
            s = s[:-1] + "a"  # a generateName prefix may end in a dash
        errors = [] if regex.fullmatch(s) else [f"a {what} must consist of valid characters"]
        if len(s) > limit:
            errors.append(f"must be no more than {limit} characters")
        return errors
    return check


def _qualified_name(s: str) -> list[str]:
    parts = s.split("/")
    if len(parts) > 2:
        return ["a qualified name must consist of an optional DNS subdomain prefix and a name"]
    name = parts[-1]
    errors = [] if name and len(name) <= 63 and _NAME.fullmatch(name) else ["name part must be a valid name"]
    if len(parts) == 2 and (not parts[0] or _pattern(_SUBDOMAIN, 253, "DNS-1123 subdomain")(parts[0])):
        errors.append("prefix part must be a DNS-1123 subdomain")
    return errors


def _label_value(s: str) -> list[str]:
    valid = not s or _NAME.fullmatch(s)
    errors = [] if valid else ["a valid label must be an empty string or consist of valid characters"]
    return errors + (["must be no more than 63 characters"] if len(s) > 63 else [])


def _uri(s: str) -> list[str]:
    """Go's url.ParseRequestURI: an absolute URI or an absolute path, no spaces or bad escapes."""
    if not s or any(c.isspace() or ord(c) < 0x20 for c in s) or re.search(r"%(?![0-9A-Fa-f]{2})", s):
        return [f"parse {s!r}: invalid URI for request"]
    return [] if s.startswith("/") or _SCHEME.match(s) else [f"parse {s!r}: invalid URI for request"]


def _byte(s: str) -> list[str]:
    try:
        base64.b64decode(s, validate=True)
        return []
    except (binascii.Error, ValueError):
        return ["invalid base64"]


def _date(s: str) -> list[str]:
    try:
        if _DATE.fullmatch(s):
            datetime.date.fromisoformat(s)
            return []
    except ValueError:
        pass
    return ["invalid date"]


def _datetime(s: str) -> list[str]:
    try:
        datetime.datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
        return [] if "T" in s.upper() else ["invalid datetime"]
    except ValueError:
        return ["invalid datetime"]


FORMATS = {
    "dns1123Label": _pattern(_LABEL, 63, "lowercase RFC 1123 label"),
    "dns1123Subdomain": _pattern(_SUBDOMAIN, 253, "lowercase RFC 1123 subdomain"),
    "dns1035Label": _pattern(_1035, 63, "DNS-1035 label"),
    "qualifiedName": _qualified_name,
    "dns1123LabelPrefix": _pattern(_LABEL, 63, "lowercase RFC 1123 label", prefix=True),
    "dns1123SubdomainPrefix": _pattern(_SUBDOMAIN, 253, "lowercase RFC 1123 subdomain", prefix=True),
    "dns1035LabelPrefix": _pattern(_1035, 63, "DNS-1035 label", prefix=True),
    "labelValue": _label_value,
    "uri": _uri,
    "uuid": lambda s: [] if _UUID.fullmatch(s) else ["does not match the UUID format"],
    "byte": _byte,
    "date": _date,
    "datetime": _datetime,
}


DECLARATIONS = [
    function("format.named", ("string",), "optional(Format)"),
    *[function(f"format.{name}", (), "Format") for name in FORMATS],
    method("validate", "Format", ("string",), "optional(list(string))", cost="walk_argument"),
]


def _validate(fmt, s):
    if not (isinstance(fmt, dict) and fmt.get(_F) in FORMATS) or not isinstance(s, str):
        raise ValueError("validate needs a format and a string")
    errors = FORMATS[fmt[_F]](s)
    return optional(errors) if errors else optional(present=False)


FUNCTIONS = {"format__named": lambda name: optional({_F: name}) if name in FORMATS else optional(present=False),
             "validate": _validate,
             **{f"format__{name}": (lambda name=name: {_F: name}) for name in FORMATS}}
