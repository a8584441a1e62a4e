"""Shared by every layer: errors that name the field, quantities, manifest documents, the
Kubernetes vocabulary (metadata, controllers, our keys) and releases. Imports nothing else of ours."""

from . import deadline, release
from .retry import Backoff, Throttled
from .deadline import DeadlineExceeded
from .claimheld import allocation_results, held_devices
from .documents import by_kind, dump_document, dump_documents, labels_by_name, parse_objects, read_objects
from .errors import BridgeError, ClusterUnreachable, InputError, PolicyError, TemplateEnsureError, WriteConflict
from .nodes import add_quota, device_quota, extended_allocatable, leaving_dra, not_ready, quota_map
from .nodeselector import node_matches, tolerates
from .quantity import count_or_none, format_mebibytes, parse_count, parse_quantity
from . import vocabulary
from .objects import ObjectView, submap, view_of
from .packed import pack, unpack
from .vocabulary import NVIDIA_DRIVER, SHADOW_OF, controller_ref
from .vocabulary import meta as metadata_of

__all__ = ["release", "ClusterUnreachable", "ObjectView", "submap", "view_of", "allocation_results", "held_devices", "by_kind", "NVIDIA_DRIVER", "SHADOW_OF", "vocabulary", "controller_ref", "metadata_of", "Backoff", "Throttled", "BridgeError", "DeadlineExceeded", "deadline", "InputError", "PolicyError", "TemplateEnsureError", "WriteConflict", "add_quota", "device_quota", "extended_allocatable", "leaving_dra", "not_ready", "node_matches", "quota_map", "tolerates", "format_mebibytes", "count_or_none", "parse_count",
           "dump_document", "dump_documents", "labels_by_name", "parse_objects", "parse_quantity", "read_objects", "pack", "unpack"]
