"""`dra-bridge reporter`: open the GPU backend, then print the slices once or run the publish loop."""

from __future__ import annotations

import sys

from app import kube
from app.common import BridgeError, dump_documents
from app.reporter import EXIT_NO_GPUS, BackendError, driver_for_mode, open_backend, render, render_style, run_loop

from .inputs import flag_release


def run_reporter(args) -> int:
    try:
        backend = open_backend(args.backend, partitionable=args.partitionable)
    except BackendError as exc:
        print(f"dra-bridge reporter: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.mode is None:  # publish slices beside the device plugin only when asked to
        args.mode = "publish" if args.once else "shadow"
    try:
        node = backend.read()
        if not node.gpus:
            raise BackendError("no GPUs found on this node", EXIT_NO_GPUS)
        if args.once:
            args.release = flag_release(args)
            for note in render.for_release(args.release, args.shareable, args.partitionable)[2]:
                print(f"dra-bridge reporter: {note}", file=sys.stderr)
            driver, _qualify = driver_for_mode(args.mode, args.driver_name)
            out = render.slices(node, args.node_name, driver, 1, None, **render_style(args))
            if args.with_classes:
                out += render.device_classes(driver, shadow=args.mode == "shadow")
            sys.stdout.write(dump_documents(out))
            return 0
        api = kube.api_client(args.kubeconfig, True, args.context)
        if api is None:
            raise BridgeError("reporter needs a Kubernetes API: run in-cluster or pass --kubeconfig")
        release, unprobed = kube.probed_release(api, flag_release(args, kube.server_release(api)))
        for why in unprobed:
            print(f"dra-bridge reporter: DRA gates not probed ({why}): {release.version}'s defaults assumed",
                  file=sys.stderr)
        args.release = release
        return run_loop(api, backend, args)
    except BackendError as exc:
        print(f"dra-bridge reporter: {exc}", file=sys.stderr)
        return exc.exit_code
    finally:
        backend.close()
