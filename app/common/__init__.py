"""Shared by every layer: errors that name the field to fix, Kubernetes quantities, and
manifest documents (YAML/JSON streams and Lists). Imports nothing else of ours."""

from .documents import parse_objects, read_objects
from .errors import BridgeError, InputError, PolicyError, TemplateEnsureError
from .quantity import format_mebibytes, parse_count, parse_quantity

__all__ = ["BridgeError", "InputError", "PolicyError", "TemplateEnsureError", "format_mebibytes", "parse_count",
           "parse_objects", "parse_quantity", "read_objects"]
