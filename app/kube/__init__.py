"""The only package that talks to the Kubernetes API: clients, raw list/watch reads, the live
inventory (ResourceSlices, DeviceClasses, ResourceClaims), templates and namespace labels."""

from .client import (ApiTarget, api_client, api_client_for_host, api_message, connect, list_items, list_pages, probe,
                     raw_get, unreachable)
from .live_inventory import LiveInventory
from .namespaces import NamespaceLabels, NamespaceLookupError
from .template_gc import Lease, TemplateCollector, TemplateWatch
from .templates import TemplateConflict, TemplateStore

__all__ = ["Lease", "TemplateCollector", "TemplateWatch", "LiveInventory", "NamespaceLabels", "NamespaceLookupError", "TemplateConflict", "TemplateStore", "ApiTarget", "api_client", "connect", "unreachable", "api_client_for_host", "api_message", "probe",
           "list_items", "list_pages",
           "raw_get"]
