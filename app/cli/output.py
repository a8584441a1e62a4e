"""What the commands print with: table cells, YAML and JSON spellings of one content."""

from __future__ import annotations


def clip(text: str, width: int) -> str:
    """A table cell: whole, or cut at a word with "..." (the JSON output keeps every word)."""
    if len(text) <= width:
        return text
    cut = text[:width - 4].rsplit(" ", 1)[0]
    return cut + " ..."


def as_yaml(data) -> str:
    """`-o yaml`: exactly what `-o json` prints, in YAML (through JSON: enums and tuples as JSON has them)."""
    import json

    import yaml
    return yaml.safe_dump(json.loads(json.dumps(data)), sort_keys=False, width=100000)


def as_json_list(objects: list[dict]) -> str:
    """`-o json` of objects to apply: one v1 List, as `kubectl get -o json` prints several."""
    import json

    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2) + "\n"
