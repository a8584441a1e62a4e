"""The parts of the Kubernetes CEL library the engine lacks, as functions and rewrites. Pure.

Functions: lists (min, max, sort, distinct, slice, flatten, reverse, lists.range), strings
(format, strings.quote, lastIndexOf with an offset, reverse), sets.*, URLs, IPs and CIDRs,
optionals, math.*. Syntax the engine cannot parse is rewritten into calls it can: namespaced
functions (`sets.contains(` -> `sets__contains(`), optional selection (`x.?f`, `x[?k]`), and
two-variable comprehensions (`l.all(i, v, e)` -> `l.cel__pairs().all(__p, e')`).
Values the engine has no type for travel as one-key maps ({"_url": ...}, {"_ip": ...},
{"_optional": [value] or []}), like quantities and semvers in cel.py.
"""

from __future__ import annotations

import ipaddress
import re
import threading

from app.common import deadline

from . import celformat
from .celscan import scan

_URL = re.compile(r"^(?:([A-Za-z][A-Za-z0-9+.-]*):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$")
_OPT, _URLK, _IPK, _CIDRK = "_optional", "_url", "_ip", "_cidr"


def _optional(value=None, present=True) -> dict:
    return {_OPT: [value] if present else []}


def _is_optional(value) -> bool:
    return isinstance(value, dict) and len(value) == 1 and _OPT in value


def _opt_select(receiver, key):
    """x.?f and x[?k]: the value when present, else none; on an optional, applied inside it."""
    if _is_optional(receiver):
        if not receiver[_OPT]:
            return receiver
        receiver = receiver[_OPT][0]
    if isinstance(receiver, dict):
        return _optional(receiver[key]) if key in receiver else _optional(present=False)
    if isinstance(receiver, list) and isinstance(key, int):
        return _optional(receiver[key]) if 0 <= key < len(receiver) else _optional(present=False)
    raise ValueError("optional selection needs a map or a list")


def _value(opt):
    if not _is_optional(opt):
        raise ValueError("value() needs an optional")
    if not opt[_OPT]:
        raise ValueError("optional.none() dereference")
    return opt[_OPT][0]


def _or_value(opt, default):
    if not _is_optional(opt):
        raise ValueError("orValue() needs an optional")
    return opt[_OPT][0] if opt[_OPT] else default


def _or(opt, other):
    return opt if opt[_OPT] else other


def _non_zero(value) -> dict:
    zero = value in (0, "", False, None) or value == [] or value == {}
    return _optional(value, present=not zero)


# -- lists ---------------------------------------------------------------------------------
def _list(value, name):
    if not isinstance(value, list):
        raise ValueError(f"{name}() needs a list")
    return value


def _extreme(pick):
    def apply(receiver, *more):
        items = list(more) if more else _list(receiver, pick.__name__)
        if more:
            items = [receiver, *more]
        if not items:
            raise ValueError(f"{pick.__name__}() of an empty list")
        return pick(items)
    return apply


def _flatten(items, depth=1):
    out = []
    for item in _list(items, "flatten"):
        if isinstance(item, list) and depth > 0:
            out.extend(_flatten(item, depth - 1))
        else:
            out.append(item)
    return out


def _distinct(items):
    out = []
    for item in _list(items, "distinct"):
        if not any(type(item) is type(o) and item == o for o in out):
            out.append(item)
    return out


def _slice(items, start, end):
    if not 0 <= start <= end <= len(_list(items, "slice")):
        raise ValueError(f"slice({start}, {end}) out of range")
    return items[start:end]


def _reverse(value):
    return _list(value, "reverse")[::-1]


def _end(pick: int):
    """ext.Lists v3 first() / last(): the element, as an optional (none for an empty list)."""
    def end(items):
        items = _list(items, "first" if pick == 0 else "last")
        return _optional(items[pick]) if items else _optional(present=False)
    return end


def _to_map(pairs) -> dict:
    return {k: v for k, v in pairs}


def _merge_entries(entries) -> dict:
    """transformMapEntry: the one-entry maps its body made, merged; a key twice is an error."""
    out: dict = {}
    for entry in entries:
        if not isinstance(entry, dict) or len(entry) != 1:
            raise ValueError("transformMapEntry: the expression must make a map of one entry")
        (key, value), = entry.items()
        if key in out:
            raise ValueError(f"transformMapEntry: duplicate key {key!r}")
        out[key] = value
    return out


def _pairs(receiver):
    """(index or key, value) pairs for two-variable comprehensions."""
    if isinstance(receiver, list):
        return [[i, v] for i, v in enumerate(receiver)]
    if isinstance(receiver, dict):
        return [[k, v] for k, v in receiver.items()]
    raise ValueError("a two-variable comprehension needs a list or a map")


# -- strings -------------------------------------------------------------------------------
MAX_COST = 1_000_000  # per selector evaluation, as resource.k8s.io limits it
_local = threading.local()


def reset_charge() -> None:
    _local.spent = 0


def charge(characters: int) -> None:
    """Runtime cost of building a string, as upstream counts it (0.1 per character): past the
    per-selector limit the evaluation is cancelled before the string exists."""
    spent = getattr(_local, "spent", 0) + characters // 10
    _local.spent = spent
    if spent > MAX_COST:
        raise ValueError("operation cancelled: actual cost limit exceeded")


MAX_BUILT_STRING = 100_000_000  # characters: past this the process would run out of memory


def guard_size(characters: int) -> None:
    """A string this long is refused before it is built (upstream's creation-time cost limit
    refuses such selectors; this guards the evaluation of one sent to us directly)."""
    if characters > MAX_BUILT_STRING:
        raise ValueError("operation cancelled: actual cost limit exceeded")


def _format(template: str, args: list) -> str:
    """cel-go's strings.format: %s %d %f %e %x %X %o %b %%, each taking the next argument."""
    out, i, n = [], 0, 0
    while i < len(template):
        c = template[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        spec = re.match(r"%(\.\d+)?([sdfeExXob%])", template[i:])
        if not spec:
            raise ValueError(f"format: bad verb at {i}")
        i += spec.end()
        verb, precision = spec[2], spec[1]
        charge(int(precision[1:]) if precision else 0)
        if verb == "%":
            out.append("%")
            continue
        if n >= len(args):
            raise ValueError("format: too few arguments")
        arg, n = args[n], n + 1
        if verb == "s":
            out.append(_text(arg))
        elif verb == "d":
            out.append(str(int(arg)))
        elif verb in "fe" or verb == "E":
            digits = int(precision[1:]) if precision else 6
            out.append(format(float(arg), f".{digits}{verb}"))
        else:
            out.append(format(int(arg) if not isinstance(arg, str) else int(arg.encode().hex(), 16),
                              {"x": "x", "X": "X", "o": "o", "b": "b"}[verb]))
        charge(len(out[-1]))
    return "".join(out)


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def _last_index_of(receiver, item, *offset):
    if isinstance(receiver, str):
        return receiver.rfind(item, 0, offset[0] + len(item)) if offset else receiver.rfind(item)
    items = _list(receiver, "lastIndexOf")
    return len(items) - 1 - items[::-1].index(item) if item in items else -1


# -- URLs, IPs, CIDRs ------------------------------------------------------------------------
def _parse_url(text):
    match = _URL.match(text) if isinstance(text, str) else None
    if not match or not match[1] and not text.startswith("/"):
        raise ValueError(f"{text!r} is not a URL")
    return match


def _url(text):
    _parse_url(text)
    return {_URLK: text}


def _is_url(text) -> bool:
    try:
        _parse_url(text)
        return True
    except ValueError:
        return False


def _url_part(index):
    def get(url):
        return _parse_url(url[_URLK])[index] or ""
    return get


def _host(url, with_port: bool):
    authority = _parse_url(url[_URLK])[2] or ""
    authority = authority.rsplit("@", 1)[-1]
    if authority.startswith("["):
        host = authority[1:].partition("]")[0]
        return authority if with_port else host
    host, _, port = authority.partition(":")
    return port if with_port else host


def _ip(text):
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an IP address") from None
    if address.version == 6 and address.ipv4_mapped:
        raise ValueError("IPv4-mapped IPv6 addresses are not allowed")
    return {_IPK: str(address)}


def _cidr(text):
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise ValueError(f"{text!r} is not a CIDR") from None
    return {_CIDRK: text, "_net": str(network)}


def _succeeds(parse):
    def check(text) -> bool:
        try:
            parse(text)
            return True
        except ValueError:
            return False
    return check


def _address(value):
    return ipaddress.ip_address(value[_IPK] if isinstance(value, dict) else value)


def _network(value):
    return ipaddress.ip_network(value["_net"], strict=False)


def _contains_ip(cidr, ip) -> bool:
    address = _address(ip if isinstance(ip, dict) else _ip(ip))
    return address in _network(cidr)


def _contains_cidr(cidr, other) -> bool:
    inner = _network(other if isinstance(other, dict) else _cidr(other))
    outer = _network(cidr)
    return inner.version == outer.version and inner.subnet_of(outer)


def _family(value) -> int:
    return _address(value).version


FUNCTIONS = {
    # optionals
    "optional__of": _optional, "optional__none": lambda: _optional(present=False),
    "optional__ofNonZeroValue": _non_zero, "optional__select": _opt_select, "optional__value": _value,
    "optional__hasValue": lambda opt: bool(opt[_OPT]), "optional__orValue": _or_value, "optional__or": _or,
    # lists
    "max": _extreme(max), "min": _extreme(min), "sort": lambda items: sorted(_list(items, "sort")),
    "distinct": _distinct, "slice": _slice, "flatten": _flatten, "reverse": _reverse,
    "lists__range": lambda n: list(range(n)), "cel__pairs": _pairs, "first": _end(0), "last": _end(-1),
    "cel__to_map": _to_map, "cel__merge_entries": _merge_entries,
    "cel__sort_keyed": lambda rows: [v for _k, v in sorted(rows, key=lambda kv: kv[0])],
    # sets
    "sets__contains": lambda a, b: all(any(type(x) is type(y) and x == y for y in a) for x in b),
    "sets__equivalent": lambda a, b: all(x in b for x in a) and all(y in a for y in b),
    "sets__intersects": lambda a, b: any(x in b for x in a),
    # strings
    "format": _format, "strings__quote": _quote, "lastIndexOf": _last_index_of,
    # URLs
    "url": _url, "isURL": _is_url, "getScheme": _url_part(1), "getEscapedPath": _url_part(3),
    "getQuery": lambda url: _query(_parse_url(url[_URLK])[4] or ""),
    "getHost": lambda url: (_parse_url(url[_URLK])[2] or "").rsplit("@", 1)[-1],
    "getHostname": lambda url: _host(url, False), "getPort": lambda url: _host(url, True),
    # IPs and CIDRs
    "ip": _ip, "isIP": _succeeds(_ip), "cidr": _cidr, "isCIDR": _succeeds(_cidr), "family": _family,
    "isUnspecified": lambda v: _address(v).is_unspecified, "isLoopback": lambda v: _address(v).is_loopback,
    "isLinkLocalMulticast": lambda v: _address(v).is_multicast and _address(v).is_link_local,
    "isLinkLocalUnicast": lambda v: _address(v).is_link_local and not _address(v).is_multicast,
    "isGlobalUnicast": lambda v: _address(v).is_global and not _address(v).is_multicast,
    "containsIP": _contains_ip, "containsCIDR": _contains_cidr,
    "prefixLength": lambda c: _network(c).prefixlen, "masked": lambda c: _cidr(str(_network(c))),
}
FUNCTIONS.update(celformat.functions(_optional))


def _query(text: str) -> dict:
    out: dict = {}
    for part in filter(None, text.split("&")):
        key, _, value = part.partition("=")
        out.setdefault(key, []).append(value)
    return out


# -- rewrites --------------------------------------------------------------------------------
_NAMESPACED = re.compile(r"\b(sets|lists|strings|optional|format)\s*\.\s*([A-Za-z_]\w*)\s*\(")
_OPTIONAL_METHODS = re.compile(r"\.\s*(value|hasValue|orValue)\s*\(")
_SORT_BY = re.compile(r"\.\s*sortBy\s*\(")
_OPT_FIELD = re.compile(r"\.\s*\?\s*([A-Za-z_]\w*)")
_OPT_INDEX = re.compile(r"\[\s*\?")
_OR = re.compile(r"\.\s*or\s*\(")
_TWO_VARIABLE = re.compile(r"\.\s*(all|exists_one|exists|transformList|transformMapEntry|transformMap)\s*\(")
_TRANSFORMS = ("transformList", "transformMap", "transformMapEntry")
_IDENT = re.compile(r"[A-Za-z_]\w*")


def _receiver_start(text: str, end: int) -> int:
    """Where the primary expression ending just before `end` starts (identifiers, selections,
    calls and indexes chained with dots)."""
    opening = scan(text).open_of
    pos = end - 1
    while True:
        while pos >= 0 and text[pos].isspace():
            pos -= 1
        if pos >= 0 and text[pos] in ")]}" and pos in opening:
            pos = opening[pos] - 1
            while pos >= 0 and text[pos].isspace():
                pos -= 1
            if pos >= 0 and (text[pos].isalnum() or text[pos] == "_"):
                while pos >= 0 and (text[pos].isalnum() or text[pos] == "_"):
                    pos -= 1
            elif pos >= 0 and text[pos] in ")]":
                continue
        elif pos >= 0 and (text[pos].isalnum() or text[pos] == "_"):
            while pos >= 0 and (text[pos].isalnum() or text[pos] == "_"):
                pos -= 1
        elif pos >= 0 and text[pos] in "'\"":
            quote = text[pos]
            pos = text.rfind(quote, 0, pos) - 1
        else:
            return pos + 1
        look = pos
        while look >= 0 and text[look].isspace():
            look -= 1
        if look >= 0 and text[look] == "." and not (look > 0 and text[look - 1].isdigit()):
            pos = look - 1
            continue
        return pos + 1


def rewrite(expression: str) -> str:
    """Expression text the engine can run: see the module docstring."""
    text = _optional_elements(expression)
    text = _sub_outside(text, _NAMESPACED, lambda m: f"{m[1]}__{m[2]}(")
    text = _sub_outside(text, _OR, lambda m: ".optional__or(")
    text = _sub_outside(text, _OPTIONAL_METHODS, lambda m: f".optional__{m[1]}(")
    text = _sort_by(text)
    text = _global_matches(text)
    text = _optional_selections(text)
    return _two_variable(text)


def _optional_elements(text: str) -> str:
    """[a, ?b] -> ([a] + (b.hasValue() ? [b.value()] : [])): optional list elements, which the
    engine's parser lacks (an element is kept only when its optional has a value)."""
    while True:
        deadline.check()
        sc = scan(text)
        found = None
        for open_at in sc.opens:
            _i, before = sc.previous_char(open_at)
            if text[open_at] != "[" or (before and (before.isalnum() or before in "_])'\"")):
                continue  # an index, not a list literal
            parts = sc.parts(open_at)
            if any(text[a:b].lstrip().startswith("?") for a, b in parts):
                found = open_at, parts
                break
        if found is None:
            return text
        open_at, parts = found
        pieces, plain = [], []
        for a, b in parts:
            element = text[a:b].strip()
            if element.startswith("?"):
                if plain:
                    pieces.append(f"[{', '.join(plain)}]")
                    plain = []
                value = f"({element[1:].strip()})"
                pieces.append(f"({value}.hasValue() ? [{value}.value()] : [])")
            elif element:
                plain.append(element)
        if plain:
            pieces.append(f"[{', '.join(plain)}]")
        text = f"{text[:open_at]}({' + '.join(pieces)}){text[sc.close(open_at) + 1:]}"


_GLOBAL_MATCHES = re.compile(r"(?<![\w.])matches\s*\(")


def _global_matches(text: str) -> str:
    """matches(s, re) -> (s).matches(re): upstream declares both forms, the engine the method."""
    def rewrite(text, match, args, close):
        if len(args) != 2:
            return text, match.end()
        return (f"{text[:match.start()]}({args[0].strip()}).matches({args[1].strip()}){text[close + 1:]}",
                match.start() + 1)
    return _each_call(text, _GLOBAL_MATCHES, rewrite)


def _each_call(text: str, pattern: re.Pattern, rewrite) -> str:
    """Rewrite each call `pattern` finds outside strings, left to right: rewrite(text, match,
    arguments, closing paren) -> (new text, where to look next)."""
    start = 0
    while True:
        deadline.check()
        match = _first_outside(text, pattern, start)
        if match is None:
            return text
        open_at = match.end() - 1
        text, start = rewrite(text, match, scan(text).part_texts(open_at), scan(text).close(open_at))


def _first_outside(text: str, pattern: re.Pattern, start: int = 0):
    sc = scan(text)
    return next((m for m in pattern.finditer(text, start) if not sc.in_string(m.start())), None)


def _sort_by(text: str) -> str:
    """l.sortBy(x, key) -> l.map(x, [key, x]).cel__sort_keyed(): no need to find l's extent."""
    def rewrite(text, match, args, close):
        if len(args) != 2 or not _IDENT.fullmatch(args[0].strip()):
            raise ValueError("sortBy takes a variable and a key expression")
        var = args[0].strip()
        head = f"{text[:match.start()]}.map({var}, ["
        return f"{head}{args[1]}, {var}]).cel__sort_keyed(){text[close + 1:]}", len(head)  # nested sortBy ahead
    return _each_call(text, _SORT_BY, rewrite)


def _sub_outside(text: str, pattern: re.Pattern, replace) -> str:
    sc = scan(text)
    out, last = [], 0
    for m in pattern.finditer(text):
        if not sc.in_string(m.start()):
            out.append(text[last:m.start()])
            out.append(replace(m))
            last = m.end()
    out.append(text[last:])
    return "".join(out)


def _optional_selections(text: str) -> str:
    while True:
        deadline.check()
        field = _first_outside(text, _OPT_FIELD)
        index = _first_outside(text, _OPT_INDEX)
        if field is None and index is None:
            return text
        if field is not None and (index is None or field.start() < index.start()):
            start = _receiver_start(text, field.start())
            text = f"{text[:start]}optional__select({text[start:field.start()]}, '{field[1]}'){text[field.end():]}"
        else:
            start = _receiver_start(text, index.start())
            close = scan(text).close(index.start())
            key = text[index.end():close]
            text = f"{text[:start]}optional__select({text[start:index.start()]}, {key}){text[close + 1:]}"


def _two_variable(text: str) -> str:
    def rewrite(text, match, args, close):
        names = [a.strip() for a in args[:2]]
        macro = match[1]
        if len(args) not in ((3, 4) if macro in _TRANSFORMS else (3,)) or not all(_IDENT.fullmatch(a) for a in names):
            return text, match.end()
        bodies = [_bind_pair(body, names) for body in args[2:]]
        if macro in _TRANSFORMS:
            value = bodies[-1] if macro != "transformMap" else f"[__p[0], {bodies[-1]}]"
            call = (f".cel__pairs().filter(__p, {bodies[0]}).map(__p, {value})" if len(bodies) == 2
                    else f".cel__pairs().map(__p, {value})")
            call += {"transformList": "", "transformMap": ".cel__to_map()",
                     "transformMapEntry": ".cel__merge_entries()"}[macro]
        else:
            call = f".cel__pairs().{macro}(__p, {bodies[0]})"
        return text[:match.start()] + call + text[close + 1:], match.start() + len(call)
    return _each_call(text, _TWO_VARIABLE, rewrite)


def _bind_pair(body: str, names: list[str]) -> str:
    """The body with the two variables read from the pair __p."""
    out, last = [], 0
    for m in re.finditer(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[A-Za-z_]\w*", body):
        word = m.group(0)
        before = body[:m.start()].rstrip()
        if word in names and not before.endswith("."):
            out.append(body[last:m.start()])
            out.append(f"__p[{names.index(word)}]")
            last = m.end()
    out.append(body[last:])
    return "".join(out)
