"""`dra-bridge classes`: the DeviceClasses that let the cluster serve legacy GPU resources
through DRA (the native path), printed for `kubectl apply -f -`."""

from __future__ import annotations

import sys


from app import dra
from app.common import InputError, dump_documents

from .inputs import load_inventory


def run_classes(args) -> int:
    inventory = load_inventory(args.inventory)
    try:
        generated = dra.generate_classes(inventory, args.driver)
    except dra.ClassConflict as exc:
        raise InputError("--inventory", str(exc)) from None
    for resource, name in sorted(generated.kept.items()):
        sys.stderr.write(f"{resource}: already served by DeviceClass {name}\n")
    if generated.classes:
        sys.stdout.write(dump_documents(generated.classes))
    else:
        sys.stderr.write("nothing to add: every resource the inventory can serve has its DeviceClass\n")
    return 0
