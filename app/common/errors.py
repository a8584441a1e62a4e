"""Errors that carry the field path a user must fix."""


class BridgeError(Exception):
    """Base class: every error we raise on purpose."""


class ClusterUnreachable(BridgeError):
    """The command could not ask the cluster (refused, timed out, TLS, forbidden): exit 3, never
    read as an answer."""


class InputError(BridgeError):
    """Bad user input; `field` names where (dotted / indexed path)."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


class PolicyError(BridgeError):
    """A policy file that does not validate."""


class TemplateEnsureError(BridgeError):
    """The Kubernetes API did not confirm a ResourceClaimTemplate exists."""


class WriteConflict(BridgeError):
    """The object changed since it was read (the API answered 409 to a write with its
    resourceVersion): read it again before deciding anything."""
