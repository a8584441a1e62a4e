"""Extended resources a DeviceClass serves through DRA (KEP-5004): every class serves
`deviceclass.resource.kubernetes.io/<class>`, and the resource its `extendedResourceName` names.
The scheduler creates the pod's claim for them, so the admin rules count them on the pod as
that claim: no spelling of a GPU request is a way round a rule. Pure."""

from __future__ import annotations

from decimal import Decimal

from app import dra
from app.common import InputError, parse_quantity
from app.migration import asked, is_legacy, served_resources
from app.policy import Policy

IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def dra_extended_asks(spec: dict, policy: Policy, classes: dict[str, dict]) -> list[tuple[str, str, str, int]]:
    """(container path, resource, DeviceClass, count) of each ask a class serves; a resource the
    policy migrates (nvidia.com/gpu) is counted as such already, not again here."""
    served = served_resources(classes)
    out = []
    for list_name in CONTAINER_LISTS:
        for i, container in enumerate(spec.get(list_name) or []):
            resources = container.get("resources") if isinstance(container, dict) else None
            if not isinstance(resources, dict):
                continue
            for resource, value in asked(resources).items():
                resource = str(resource)
                if resource.startswith(IMPLICIT_PREFIX):
                    device_class = resource[len(IMPLICIT_PREFIX):]
                elif resource in served and not is_legacy(resource, policy.migration):
                    device_class = served[resource]
                else:
                    continue
                count = _count(value)
                if count > 0:
                    out.append((f"spec.{list_name}[{i}]", resource, device_class, count))
    return out


def _count(value: object) -> int:
    """Whole devices: what the API server accepts for an extended resource (an integer); anything
    else counts as one more than its floor, so a rule never counts less than is asked."""
    try:
        amount = parse_quantity(value)
    except (InputError, ValueError, ArithmeticError):
        return 1
    whole = int(amount)
    return whole if Decimal(whole) == amount else whole + 1


def as_claim_spec(asks: list[tuple[str, str, str, int]]) -> dra.ClaimSpec:
    """The claim the scheduler creates for them: one request per ask, all devices of the class."""
    return dra.ClaimSpec([[dra.Request(f"{path.rsplit('.', 1)[-1]}-{n}", device_class, [], count=count,
                                       path=f"{path} {resource}")]
                          for n, (path, resource, device_class, count) in enumerate(asks)])
