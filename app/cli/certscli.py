"""`dra-bridge certs`: a CA and serving certificate for the webhook Service, and optionally a
kustomize overlay beside them that deploys a base (`manifests/`) with those certificates; the
base itself is never edited."""

from __future__ import annotations

import base64
import os

import yaml

from app.common import InputError, read_objects, view_of

from .namespacemove import as_kustomize_patches, moved_to

WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
TLS_SECRET = "dra-bridge-tls"
SECRET_FILE = "tls-secret.yaml"  # the Secret the overlay applies, beside the files it is made of
BASE_IMAGE = "dra-bridge"  # the placeholder the manifests name: no image is published


def run_certs(args) -> int:
    from app import certs  # not at import: the other commands need no cryptography

    out = args.out
    if args.image and not args.inject:
        raise InputError("--image", "only with --inject: it is the image the overlay deploys (nothing else uses it)")
    if args.inject and not args.image:
        raise InputError("--image", "required with --inject: no image is published; name the one you pushed "
                                    "(--image REGISTRY/dra-bridge:TAG)")
    if args.audit_cronjob and not args.inject:
        raise InputError("--audit-cronjob", "only with --inject BASE: it adds the CronJob to that overlay")
    if args.cert_manager and not args.inject:
        raise InputError("--cert-manager", "only with --inject BASE: it writes an overlay of that base")
    base = base_of(args.inject) if args.inject else ""
    objects = base_objects(base) if base else []
    components = [audit_component(base, args.audit_cronjob)] if args.audit_cronjob else []
    objects += [o for folder in components for o in base_objects(folder)]  # they move namespace alike
    webhooks = webhook_configurations(objects, base) if base else []  # checked before anything is written
    moves = moved_to(objects, args.namespace) if base else []
    hosts = _hosts(args)
    if args.cert_manager:
        from .certmanagercli import CERTIFICATE_FILE, write_cert_manager_overlay

        _check_out_folder(out, args.force, ("kustomization.yaml", CERTIFICATE_FILE))
        path = write_cert_manager_overlay(out, base, moves, webhooks, service=args.service,
                                          namespace=args.namespace, hosts=hosts, secret=TLS_SECRET,
                                          images=[{"name": BASE_IMAGE, **_image(args.image)}],
                                          components=components)
        print(f"wrote {path} and {os.path.join(out, 'certificate.yaml')}: {base} with cert-manager issuing "
              f"Secret {args.namespace}/{TLS_SECRET} for {', '.join(hosts)} and injecting its CA")
        print(f"deploy with: kubectl apply -k {out}  (cert-manager must be installed)")
        return 0
    _check_out_folder(out, args.force)
    try:
        bundle = certs.write_bundle(out, hosts, args.days)
    except OSError as exc:
        raise InputError("--out", f"{out}: cannot write there ({exc.strerror or exc})") from exc
    print(f"wrote {bundle.ca_cert}, {bundle.cert}, {bundle.key} for {', '.join(hosts)}")
    if args.inject:
        with open(bundle.ca_cert, "rb") as handle:
            ca_b64 = base64.b64encode(handle.read()).decode()
        _write_secret(out, bundle, args.namespace)
        path = os.path.join(out, "kustomization.yaml")
        text = overlay(os.path.relpath(base, out), webhooks, ca_b64, args.namespace, args.image, moves,
                       os.path.abspath(base), [os.path.relpath(c, out) for c in components])
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        names = ", ".join(f"{kind}/{name}" for kind, name, _n in webhooks)
        print(f"wrote {path}: {base} with Secret {args.namespace}/{TLS_SECRET} and the CA in {names}")
        print(f"deploy with: kubectl apply -k {out}")
    return 0


def _hosts(args) -> list[str]:
    from app import certs

    return certs.service_hosts(args.service, args.namespace) + list(args.host)


def _write_secret(out: str, bundle, namespace: str) -> None:
    """The TLS Secret as the API server stores it: base64 on one line (kustomize's secretGenerator
    wraps it at 76 characters, the server does not, so every apply would report it configured)."""
    data = {}
    for key, path in (("tls.crt", bundle.cert), ("tls.key", bundle.key)):
        with open(path, "rb") as handle:
            data[key] = base64.b64encode(handle.read()).decode()
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": TLS_SECRET, "namespace": namespace},
              "type": "kubernetes.io/tls", "data": data}
    with open(os.path.join(out, SECRET_FILE), "w", encoding="utf-8") as handle:
        handle.write("# Written by `dra-bridge certs --inject` from tls.crt and tls.key: it holds the private key.\n")
        handle.write(yaml.safe_dump(secret, sort_keys=False, width=100000))


def _check_out_folder(out: str, force: bool, names=("ca.crt", "tls.crt", "tls.key", SECRET_FILE)) -> None:
    if os.path.exists(out) and not os.path.isdir(out):
        raise InputError("--out", f"{out}: is a file; name a folder for {', '.join(names)}")
    present = [n for n in names if os.path.exists(os.path.join(out, n))]
    if present and not force:
        raise InputError("--out", f"{out} already holds {', '.join(present)}: pass --force to replace them, "
                                  "or name another folder")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        raise InputError("--out", f"{out}: cannot create it ({exc.strerror or exc})") from exc


def base_of(folder: str) -> str:
    """The base an overlay takes from --inject: the folder itself, or, for an entry point that
    composes components (manifests/ names its image in manifests/image and refuses to render
    without it), the one folder it builds on: the overlay sets the image itself."""
    path = os.path.join(folder, "kustomization.yaml")
    if not os.path.isfile(path):
        return folder
    with open(path, encoding="utf-8") as handle:
        doc = yaml.safe_load(handle) or {}
    if not doc.get("components"):
        return folder
    folders = [r for r in doc.get("resources") or [] if os.path.isdir(os.path.join(folder, r))]
    if len(folders) != 1 or len(doc.get("resources") or []) != 1:
        raise InputError("--inject", f"{folder}: composes components over {doc.get('resources')}; "
                                     "name the base it builds on (e.g. manifests/)")
    return os.path.normpath(os.path.join(folder, folders[0]))


def base_objects(folder: str) -> list[dict]:
    """The objects of a kustomize base's files (its kustomization files left out)."""
    if not os.path.isdir(folder):
        raise InputError("--inject", f"{folder}: no such folder (name the kustomize base, e.g. manifests/)")
    found = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            if name.endswith((".yaml", ".yml")) and not name.startswith("kustomization."):
                found += [obj for _line, obj in read_objects(os.path.join(root, name))]
    return found


def webhook_configurations(objects: list[dict], folder: str) -> list[tuple[str, str, int]]:
    """(kind, name, number of webhooks) of each webhook configuration in a kustomize base."""
    found = [(obj["kind"], view_of(obj).name, len(obj.get("webhooks") or [])) for obj in objects
             if obj.get("kind") in WEBHOOK_KINDS]
    if not found:
        raise InputError("--inject", f"{folder}: no Mutating/ValidatingWebhookConfiguration in it")
    return found


def _image(image: str) -> dict:
    """kustomize's images entry for REPO, REPO:TAG or REPO@sha256:DIGEST."""
    if "@" in image:
        name, digest = image.split("@", 1)
        return {"newName": name, "digest": digest}
    if ":" in image.rsplit("/", 1)[-1]:
        name, tag = image.rsplit(":", 1)
        return {"newName": name, "newTag": tag}
    return {"newName": image}


def audit_component(base: str, where: str) -> str:
    """The audit CronJob's kustomize component: --audit-cronjob's folder, or `audit` beside the base."""
    folder = where if where != "beside" else os.path.join(os.path.dirname(os.path.abspath(base)), "audit")
    if not os.path.isfile(os.path.join(folder, "kustomization.yaml")):
        raise InputError("--audit-cronjob", f"{folder}: no kustomize component there (manifests/audit)")
    return folder


def overlay(base: str, webhooks: list[tuple[str, str, int]], ca_b64: str, namespace: str,
            image: str | None, moves: list[dict] = (), base_at: str = "", components: list[str] = ()) -> str:
    """A kustomization: the base, the TLS Secret written beside it (SECRET_FILE), every webhook's caBundle;
    with moves (namespace_patches), the whole base in `namespace`."""
    doc: dict = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        **({"namespace": namespace} if moves else {}),
        "resources": [base, SECRET_FILE],
        **({"components": list(components)} if components else {}),
        "patches": [{"target": {"kind": kind, "name": name},
                     "patch": yaml.safe_dump([{"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle",
                                               "value": ca_b64} for i in range(count)], width=100000)}
                    for kind, name, count in webhooks],
    }
    doc["patches"] += as_kustomize_patches(moves)
    if image:
        doc["images"] = [{"name": BASE_IMAGE, **_image(image)}]
    header = ("# Written by `dra-bridge certs --inject`: deploy with `kubectl apply -k` on this folder.\n"
              f"# tls.key and {SECRET_FILE} (the Secret) are beside this file: keep the folder out of version control.\n"
              f"# The base is {base_at or base} (`resources` names it relative to this folder): after moving\n"
              "# either, or to take a newer release's base, point `resources` at it; the image is `images`.\n")
    return header + yaml.safe_dump(doc, sort_keys=False, width=100000)
