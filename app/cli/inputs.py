"""What the commands read: manifests from files, folders or stdin, and device inventories
(a file of ResourceSlices and DeviceClasses, or the bundled example)."""

from __future__ import annotations

import os
import sys
from importlib import resources

from app import dra
from app.common import InputError, parse_objects, parse_quantity, read_objects
from app.common import release as releases
from app.migration import pod_templates

EXAMPLE_INVENTORY = "data/example-inventory.yaml"
INVENTORY_KINDS = ("ResourceSlice", "DeviceClass")


def read_inputs(paths: list[str]) -> list[tuple[str, list[tuple[int, dict]]]]:
    """(source, [(line, object)]) for each file; a folder is walked in name order, `-` is stdin."""
    out = []
    for path in paths:
        if path == "-":
            out.append(("<stdin>", parse_objects(sys.stdin.read(), "<stdin>")))
        elif os.path.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for name in sorted(files):
                    if name.endswith((".yaml", ".yml", ".json")):
                        full = os.path.join(root, name)
                        out.append((full, read_objects(full)))
        elif os.path.exists(path):
            out.append((path, read_objects(path)))
        else:
            raise InputError(path, "no such file or folder")
    return out


def read_some_inputs(paths: list[str]) -> list[tuple[str, list[tuple[int, dict]]]]:
    """read_inputs, refusing inputs that hold no object at all (an empty file is a mistake) and
    quantities the API server would refuse."""
    inputs = read_inputs(paths)
    if not any(objects for _source, objects in inputs):
        raise InputError(" ".join(paths), "no Kubernetes objects in the input (an empty file or folder?)")
    refuse_bad_quantities(inputs)
    return inputs


def refuse_bad_quantities(inputs) -> None:
    """The API server refuses a resource quantity it cannot parse (`nvidia.com/gpu: "two"`) before
    any webhook sees it: in a file, it is bad input, named by file, line and field."""
    for source, objects in inputs:
        for line, obj in objects:
            for field, value in _resource_quantities(obj):
                try:
                    parse_quantity(value)
                except (ValueError, TypeError) as exc:
                    raise InputError(f"{source}:{line}", f"{field}: {exc}") from exc


def _resource_quantities(obj: dict):
    """(field, value) of every container resource limit and request in an object's pod templates."""
    for path, holder in pod_templates(obj):
        spec = holder.get("spec") or {}
        for group in ("initContainers", "containers"):
            for i, container in enumerate(spec.get(group) or []):
                resources = (container.get("resources") if isinstance(container, dict) else None) or {}
                for kind in ("limits", "requests"):
                    for key, value in (resources.get(kind) or {}).items():
                        yield f"{path + '.' if path else ''}spec.{group}[{i}].resources.{kind}[{key}]", value


INVENTORY_HELP = ("'live' (the cluster's ResourceSlices, DeviceClasses, claims and Nodes), 'example' (the bundled "
                  "example: 8xH100, an A100 with MIG, 4xL4; not your cluster), 'none', or a FILE of them")
EXAMPLE_SAID = "the bundled EXAMPLE inventory (not your cluster)"


def cluster_of(args):
    """connect() for --inventory live: --kubeconfig / --context where given, else the cluster
    kubectl would ask ($KUBECONFIG, ~/.kube/config, in-cluster); None where none is configured."""
    from functools import cache

    from app import kube
    # Once per command: the inventory and the policy in force are read through one connection.
    return cache(lambda: kube.connect(getattr(args, "kubeconfig", None), getattr(args, "context", None),
                                      timeout_retries=False, request_timeout=getattr(args, "request_timeout", 30.0)))


def flag_release(args, found: releases.Release | None = None) -> releases.Release:
    """The release a command judges and writes for: `found` (what a cluster's /version or an
    export says), else --kube-version, else the default; then --feature-gates. A --kube-version
    other than what the cluster runs is refused, naming both."""
    text = getattr(args, "kube_version", None)
    try:
        release = releases.parse(text, "--kube-version") if text else None
    except releases.UnknownRelease as exc:
        raise InputError("--kube-version", str(exc)) from exc
    if found is not None and release is not None and release.minor != found.minor:
        raise InputError("--kube-version", f"{text}, but the cluster runs {found.version} ({found.source})")
    release = found or release or releases.default_release()
    gates = getattr(args, "feature_gates", None)
    if gates:
        try:
            release = release.with_gates(parse_gates(gates), f"--feature-gates {gates}")
        except releases.UnknownRelease as exc:
            raise InputError("--feature-gates", str(exc)) from exc
    return release


def parse_gates(text: str) -> dict[str, bool]:
    """'A=true,B=false' as kube-apiserver's --feature-gates spells it."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        if not sep or value.strip().lower() not in ("true", "false"):
            raise InputError("--feature-gates", f"{part!r}: write GATE=true or GATE=false")
        out[name.strip()] = value.strip().lower() == "true"
    return out


def exported_release(objects) -> releases.Release | None:
    """The release an export names: a `kubectl version -o yaml` document among its objects."""
    for _line, obj in objects:
        server = obj.get("serverVersion") if isinstance(obj, dict) else None
        if isinstance(server, dict):
            try:
                return releases.from_server(server)
            except releases.UnknownRelease as exc:
                raise InputError("serverVersion", str(exc)) from exc
    return None


def choose_inventory(value: str | None, connect=None, args=None) -> tuple[dra.Inventory | None, str]:
    """One rule for every command's --inventory: (the inventory, what it is, for "judged against").
    connect() -> (api, target) for 'live' (None where no cluster is configured). The inventory is
    read as its release keeps it (inventory.release: the cluster's, the export's or the flags')."""
    chosen = value or "none"
    if chosen == "none":
        return None, "no inventory"
    if chosen == "live":
        found = connect() if connect else None
        if found is None:
            raise InputError("--inventory", "live needs a cluster: $KUBECONFIG, ~/.kube/config or in-cluster "
                                            "(none was found)")
        from app import kube
        from app.application import live_inventory
        release = flag_release(args, kube.server_release(found[0]))
        inventory = live_inventory(found[0])
        where = f"live cluster {found[1].server} ({found[1].context or found[1].source})"
    elif chosen == "example":
        inventory, where = load_inventory(None), EXAMPLE_SAID
        release = flag_release(args)
    else:
        objects = read_objects(chosen)
        inventory, where = load_inventory(chosen, objects), f"inventory {chosen}"
        release = flag_release(args, exported_release(objects))
    inventory, lost = dra.as_kept_by(inventory, release)
    if lost:
        sys.stderr.write(f"Kubernetes {release.version} drops from this inventory: {'; '.join(lost)}\n")
    return inventory, where


def load_inventory(path: str | None, objects: list | None = None) -> dra.Inventory:
    """The inventory in a file (its objects, when already read), or the bundled example inventory
    when `path` is None."""
    if path:
        objects = read_objects(path) if objects is None else objects
        if not any(obj.get("kind") in INVENTORY_KINDS for _line, obj in objects):
            kinds = sorted({str(obj.get("kind")) for _line, obj in objects})
            raise InputError(path, f"not an inventory: no ResourceSlice or DeviceClass in it (found "
                                   f"{', '.join(kinds[:5]) or 'nothing'}); export one with `kubectl get "
                                   "resourceslices,deviceclasses,resourceclaims,nodes -A -o yaml`")
        return dra.inventory_from_objects(objects, path)
    text = resources.files("app").joinpath(EXAMPLE_INVENTORY).read_text("utf-8")
    return dra.inventory_from_objects(parse_objects(text, "example-inventory.yaml"), "bundled example inventory")


def refuse_without_extended_resources(release: releases.Release, what: str) -> None:
    """Classes declaring extendedResourceName serve nothing where the release drops that field."""
    if not release.has(releases.EXTENDED_RESOURCE):
        raise InputError("spec.extendedResourceName", f"{what}: Kubernetes {release.version} ({release.source}) drops "
                         f"it ({releases.why_off(release, releases.EXTENDED_RESOURCE)}): no DeviceClass serves "
                         "nvidia.com/gpu natively there, pods take the rewrite path")
