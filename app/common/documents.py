"""Read Kubernetes objects from YAML/JSON text: multi-document streams and `kind: List`."""

from __future__ import annotations

import enum
import json

import yaml

from .errors import InputError


class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps the line each top-level mapping starts on."""


def _construct_mapping(loader, node, deep=False):
    mapping = yaml.SafeLoader.construct_mapping(loader, node, deep=deep)
    mapping["__line__"] = node.start_mark.line + 1
    return mapping


def parse_objects(text: str, source: str) -> list[tuple[int, dict]]:
    """(line, object) for every object; InputError names the file and line of bad input."""
    docs = _json_documents(text)
    try:
        if docs is None:
            docs = list(yaml.load_all(text, Loader=_line_loader()))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise InputError(f"{source}{line}", f"not valid YAML/JSON: {getattr(exc, 'problem', None) or exc}") from exc
    out: list[tuple[int, dict]] = []
    for doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise InputError(source, f"expected Kubernetes objects, found a {type(doc).__name__}")
        line = doc.pop("__line__", 0)
        items = doc.get("items") if str(doc.get("kind", "")).endswith("List") else None
        if isinstance(items, list):
            for item in items:
                if isinstance(item, dict):
                    out.append((item.pop("__line__", line), _strip_lines(item)))
            continue
        out.append((line, _strip_lines(doc)))
    return out


def _json_documents(text: str) -> list | None:
    """JSON allows tab indentation, YAML does not: try strict JSON first for JSON-looking text."""
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if isinstance(doc, dict):
        doc["__line__"] = 1
    return [doc]


def _line_loader():
    class Loader(_Loader):
        pass

    # Only top-level and list-item mappings need lines; nested ones are stripped after.
    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
    return Loader


def _strip_lines(node):
    if isinstance(node, dict):
        node.pop("__line__", None)
        for value in node.values():
            _strip_lines(value)
    elif isinstance(node, list):
        for value in node:
            _strip_lines(value)
    return node


def read_objects(path: str) -> list[tuple[int, dict]]:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from exc
    except UnicodeDecodeError:
        raise InputError(path, "not UTF-8 text") from None
    return parse_objects(text, path)


class _Dumper(yaml.SafeDumper):
    """No anchors or aliases (`&id001` / `*id001`): each document reads on its own, as kubectl
    and humans expect; no folding of long strings (a CEL expression stays on one line)."""

    def ignore_aliases(self, data) -> bool:
        return True


# A vocabulary's member (a report's status) is written as its word.
_Dumper.add_multi_representer(enum.StrEnum, lambda dumper, value: dumper.represent_str(str(value)))


def dump_documents(docs) -> str:
    """YAML documents for `kubectl apply -f -` and for people: keys in the objects' order."""
    return yaml.dump_all(list(docs), Dumper=_Dumper, sort_keys=False, width=1 << 30, allow_unicode=True)


def dump_document(doc) -> str:
    return dump_documents([doc])


def labels_by_name(objects) -> dict[str, dict]:
    """name -> labels of these objects (Namespaces, as the opt-in label and namespace rules read them)."""
    out = {}
    for obj in objects:
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        out[meta.get("name")] = meta.get("labels") or {}
    return out


def by_kind(objects) -> dict[str, list[dict]]:
    """The objects grouped by their kind, in their order."""
    out: dict[str, list[dict]] = {}
    for obj in objects:
        out.setdefault(str(obj.get("kind")), []).append(obj)
    return out
