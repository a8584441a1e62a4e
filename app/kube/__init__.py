"""The only package that talks to the Kubernetes API: clients, raw list/watch reads, the live
inventory (ResourceSlices, DeviceClasses, ResourceClaims), templates and namespace labels."""

from .client import (ApiTarget, api_client, api_client_for_host, api_message, connect, kubeconfig_paths, last_target, list_items,
                     list_pages, probe, raw_get, raw_send, unreachable)
from .admission_policies import AdmissionPolicySync
from .release import probed_release, server_release
from .claimreader import ClaimReader
from .policy_store import LastGoodPolicy, policy_digest
from .policy_in_force import ServedPolicy, read_served_policy
from .policy_reports import write_reports
from .events import EventSink
from .kueue_config import list_kueue, list_queues, read_kueue, read_queues
from .live_inventory import LiveInventory
from .leases import LeaseStore
from .holders import gone_from_this_host, holder_identity, renew_in_background
from .rollout import NodeWrites
from .rollout import snapshot as rollout_snapshot
from .namespaces import NamespaceLabels, NamespaceLookupError, opted_in_pods, running_pods
from .template_gc import Lease, TemplateCollector, TemplateWatch
from .templates import TemplateConflict, TemplateStore

__all__ = ["write_reports", "ServedPolicy", "read_served_policy", "LastGoodPolicy", "policy_digest", "AdmissionPolicySync", "probed_release", "server_release", "list_kueue", "list_queues", "read_queues", "read_kueue", "ClaimReader", "EventSink", "NodeWrites", "LeaseStore", "gone_from_this_host", "holder_identity", "renew_in_background", "rollout_snapshot", "Lease", "TemplateCollector", "TemplateWatch", "LiveInventory", "NamespaceLabels", "NamespaceLookupError", "opted_in_pods", "running_pods", "TemplateConflict", "TemplateStore", "ApiTarget", "api_client", "connect", "kubeconfig_paths", "last_target", "unreachable", "api_client_for_host", "api_message", "probe", "raw_send",
           "list_items", "list_pages",
           "raw_get"]
