"""DRA semantics, pure: the CEL environment of device selectors, the inventory index of
ResourceSlices, claim shapes, and feasibility (can these devices satisfy this claim?)."""

from app import cel
from app.cel import CelError, compile_selector, device_variable, estimated_cost
from .claims import (
                     CLAIM_KINDS,
                     SUPPORTED_VERSIONS,
                     ClaimError,
                     ClaimSpec,
                     Request,
                     claim_spec,
                     from_v1beta1,
                     parse_claim_object,
                     parse_claim_spec,
)
from .feasibility import Verdict, candidates, check
from .templateverdicts import TemplateVerdicts, plugin_advertising, publishes
from .index import Index
from .indexbuild import build_from_api
from .slicefields import IDENTITY_ATTRIBUTES, trusted_slices
from .indexbuild import build as build_index
from .inventory import Inventory, allocated_capacity, allocated_devices, shared_devices
from .inventory import from_objects as inventory_from_objects
from .classes import ClassConflict, native_gaps
from .classes import generate as generate_classes
from .live import LiveIndex
from .kept import as_kept_by
from .sharing import shareable_classes, time_sliced

__all__ = ["as_kept_by", "CLAIM_KINDS", "IDENTITY_ATTRIBUTES", "SUPPORTED_VERSIONS", "CelError", "candidates", "ClaimError", "ClaimSpec", "ClassConflict", "Index", "LiveIndex", "generate_classes",
           "Inventory", "Request", "TemplateVerdicts", "Verdict", "plugin_advertising", "publishes", "allocated_capacity", "allocated_devices", "build_from_api",
           "build_index", "cel", "check", "claim_spec", "compile_selector", "device_variable", "estimated_cost",
           "from_v1beta1", "inventory_from_objects", "parse_claim_object", "parse_claim_spec", "shareable_classes", "shared_devices",
           "time_sliced", "trusted_slices", "native_gaps"]
