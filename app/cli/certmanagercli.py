"""`dra-bridge certs --cert-manager --inject BASE`: the cert-manager path as an overlay folder of its
own, so no tracked file is edited: the base, an Issuer and Certificate for the webhook Service,
cert-manager's CA injection on every webhook configuration, the image, the namespace. No key is
written (cert-manager issues it in the cluster), so the folder can live in version control."""

from __future__ import annotations

import ipaddress
import os

import yaml

from .namespacemove import as_kustomize_patches

CERTIFICATE_FILE = "certificate.yaml"
INJECT_ANNOTATION = "cert-manager.io/inject-ca-from"


def issuer_and_certificate(service: str, namespace: str, hosts: list[str], secret: str) -> list[dict]:
    """A self-signed Issuer and the serving Certificate whose Secret the Deployment mounts."""
    names = [h for h in hosts if not _is_ip(h)]
    addresses = [h for h in hosts if _is_ip(h)]
    issuer = f"{service}-selfsigned"
    return [
        {"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
         "metadata": {"name": issuer, "namespace": namespace}, "spec": {"selfSigned": {}}},
        {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
         "metadata": {"name": service, "namespace": namespace},
         "spec": {"secretName": secret, "issuerRef": {"name": issuer}, "dnsNames": names,
                  **({"ipAddresses": addresses} if addresses else {}),
                  "privateKey": {"algorithm": "ECDSA", "size": 256}}},
    ]


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def write_cert_manager_overlay(out: str, base: str, moves: list[dict], webhooks, *, service: str,
                               namespace: str, hosts: list[str], secret: str, images: list[dict],
                               components: list[str] = ()) -> str:
    """Writes OUT/kustomization.yaml and OUT/certificate.yaml (OUT checked by the caller); returns
    the kustomization's path. moves: namespacemove.moved_to; images: the kustomization's `images`."""
    certificate = issuer_and_certificate(service, namespace, hosts, secret)
    with open(os.path.join(out, CERTIFICATE_FILE), "w", encoding="utf-8") as handle:
        handle.write("# Written by `dra-bridge certs --cert-manager`: cert-manager issues the webhook's certificate.\n")
        handle.write(yaml.safe_dump_all(certificate, sort_keys=False))
    doc: dict = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        **({"namespace": namespace} if moves else {}),
        "resources": [os.path.relpath(base, out), CERTIFICATE_FILE],
        **({"components": [os.path.relpath(c, out) for c in components]} if components else {}),
        # A strategic merge patch: a JSON-patch `add` under /metadata/annotations needs the map to exist.
        "patches": [{"target": {"kind": kind, "name": name},
                     "patch": yaml.safe_dump({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                                              "metadata": {"name": name, "annotations": {
                                                  INJECT_ANNOTATION: f"{namespace}/{service}"}}}, sort_keys=False)}
                    for kind, name, _count in webhooks],
        "images": images,
    }
    doc["patches"] += as_kustomize_patches(moves)
    path = os.path.join(out, "kustomization.yaml")
    header = ("# Written by `dra-bridge certs --cert-manager --inject`: deploy with `kubectl apply -k` on this folder\n"
              "# (cert-manager must be installed). It holds no key: it can live in version control.\n"
              f"# The base is {os.path.abspath(base)} (`resources` names it relative to this folder).\n")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(header + yaml.safe_dump(doc, sort_keys=False, width=100000))
    return path
