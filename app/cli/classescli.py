"""`dra-bridge classes`: the DeviceClasses that let the cluster serve legacy GPU resources
through DRA (the native path), printed for `kubectl apply -f -`."""

from __future__ import annotations

import sys

from app import dra
from app.application import inventory_source
from app.common import InputError, dump_documents

from .inputs import INVENTORY_HELP, cluster_of, choose_inventory, refuse_without_extended_resources


def run_classes(args) -> int:
    inventory, where = choose_inventory(args.inventory, cluster_of(args), args)
    if inventory is None:
        raise InputError("--inventory", f"classes are made for the devices you name ({INVENTORY_HELP})")
    # Said first, as every command that judges devices says it: these classes are for this hardware.
    sys.stderr.write(f"judged against: {inventory_source(dra.build_index(inventory), where)}\n")
    refuse_without_extended_resources(inventory.release, "classes")
    try:
        generated = dra.generate_classes(inventory, args.driver)
    except dra.ClassConflict as exc:
        raise InputError("--inventory", str(exc)) from exc
    for resource, name in sorted(generated.kept.items()):
        sys.stderr.write(f"{resource}: already served by DeviceClass {name}\n")
    if generated.classes:
        sys.stdout.write(dump_documents(generated.classes))
    else:
        sys.stderr.write("nothing to add: every resource the inventory can serve has its DeviceClass\n")
    return 0
