"""docs/operations.md, the runbook (and docs/rollout.md's commands), against what we ship: every `dra-bridge` command parses with
today's flags, every object, label, JSON patch path and metric it names is one the manifests
install or the code exports. A renamed flag, Secret or metric fails here, not during an outage."""

from __future__ import annotations

import re
import shlex

import jsonpatch
import pytest

from app.cli.main import build_parser
from app.migration.claim_requests import MANAGED_BY
from app.reporter import render
from app.server import Metrics
from tests.conftest import ROOT
from tests.contract.test_manifests import render as kustomize_render

RUNBOOK = (ROOT / "docs" / "operations.md").read_text()
WALKTHROUGH = (ROOT / "docs" / "rollout.md").read_text()
# kubectl's short names for the kinds the runbook names
KINDS = {"deployment": "Deployment", "configmap": "ConfigMap", "secret": "Secret", "service": "Service",
         "mutatingwebhookconfiguration": "MutatingWebhookConfiguration",
         "validatingwebhookconfiguration": "ValidatingWebhookConfiguration"}


def commands(page: str = RUNBOOK) -> list[list[str]]:
    """Each simple command of the runbook's sh blocks (pipelines, `;`, `&` and loops split),
    as words, comments, redirections and shell variables left out."""
    out = []
    for body in re.findall(r"^ *```sh\n(.*?)^ *```$", page, re.MULTILINE | re.DOTALL):
        text, lines = re.sub(r"\\\n\s*", " ", body), []
        for line in text.splitlines():  # a quote left open goes on over the next lines
            line = line.split("   #", 1)[0].split("  #", 1)[0].strip()
            if lines and not _closed(lines[-1]):
                lines[-1] += " " + line
            elif line and not line.startswith(("#", "for ", "done")):
                lines.append(line)
        for line in lines:
            lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
            lexer.whitespace_split = True
            words, current = list(lexer), []
            for i, word in enumerate(words + [";"]):
                if word in (">", ">>") or (i and words[i - 1] in (">", ">>")):
                    continue  # a redirection and its file are not the command's words
                if word in (";", "&", "|", "&&", "||", ";;"):
                    if current:
                        out.append(current)
                    current = []
                elif word != "do":
                    current.append(word)
    return out


def _closed(line: str) -> bool:
    try:
        shlex.split(line)
    except ValueError:
        return False
    return True


@pytest.fixture(scope="module")
def installed():
    objects = kustomize_render("manifests")
    return {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objects}


def test_the_runbook_has_every_section_the_issue_asks_for():
    headings = re.findall(r"^## (.+)$", RUNBOOK, re.MULTILINE)
    assert headings == ["What gets installed", "Install order", "From warn to enforce", "The webhook is down",
                        "Pods were admitted unmigrated", "A node is served twice", "A GPU budget escaped", "The policy was refused", "Rollback", "Upgrade", "Uninstall", "Renewing the certificate",
                        "Alerts"]
    assert len(commands()) >= 30


def test_every_dra_bridge_command_parses_with_todays_flags():
    parser = build_parser()
    ours = [c for page in (RUNBOOK, WALKTHROUGH) for c in commands(page) if c[0] == "dra-bridge"]
    assert {c[1] for c in ours} >= {"audit", "certs", "plan", "check", "rollout", "policy"}
    assert {c[2] for c in ours if c[1] == "rollout"} == {"status", "plan", "run", "undo"}
    for command in ours:
        try:
            parser.parse_args(command[1:])
        except SystemExit:
            pytest.fail(f"docs: `{' '.join(command)}` does not parse")


def test_every_object_the_runbook_names_is_installed(installed):
    named = set()
    for command in (c for c in commands() if c[0] == "kubectl"):
        namespace = command[command.index("-n") + 1] if "-n" in command else None
        for i, word in enumerate(command):
            kind, _, name = word.partition("/")
            if name and kind in KINDS and namespace == "dra-bridge":
                named.add((KINDS[kind], namespace, name))
            elif word in KINDS and i + 1 < len(command) and not command[i + 1].startswith("-"):
                name = command[i + 2] if command[i + 1] == "tls" else command[i + 1]
                if name.startswith("dra-bridge"):
                    named.add((KINDS[word], namespace if namespace == "dra-bridge" else None, name))
    named.discard(("Secret", "dra-bridge", "dra-bridge-tls"))  # made by `certs --inject` or cert-manager
    assert {("Deployment", "dra-bridge", "dra-bridge"), ("ConfigMap", "dra-bridge", "dra-bridge-policy"),
            ("MutatingWebhookConfiguration", None, "dra-bridge")} <= named
    named.discard(("ConfigMap", "dra-bridge", "dra-bridge-policy"))  # the admin's: mounted, never shipped
    assert not named - set(installed), sorted(named - set(installed))
    [deploy] = [o for k, o in installed.items() if k[0] == "Deployment"]
    volumes = {v["name"]: v for v in deploy["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "dra-bridge-tls" and "dra-bridge-tls" in RUNBOOK
    assert volumes["policy"]["configMap"] == {"name": "dra-bridge-policy", "optional": True}
    assert "--policy=/etc/dra-bridge/policy/policy.yaml" in deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "policy\\.yaml" in RUNBOOK  # the ConfigMap's key, as jsonpath writes it


def test_labels_the_runbook_selects_by_are_those_we_set(installed):
    labels = [c[c.index("-l") + 1] for c in commands() if c[0] == "kubectl" and "-l" in c]
    assert f"app.kubernetes.io/managed-by={MANAGED_BY['app.kubernetes.io/managed-by']}" in labels
    assert render.MANAGED_LABEL == "app.kubernetes.io/managed-by"  # the reporter's slices carry it too
    [hook] = [o for k, o in installed.items() if k[0] == "MutatingWebhookConfiguration"]
    opt_in = hook["webhooks"][0]["namespaceSelector"]["matchExpressions"][0]
    label = f"{opt_in['key']}={opt_in['values'][0]}"
    opted = [c for c in commands() if c[:3] == ["kubectl", "label", "namespace"]]
    assert label in [c[-1] for c in opted] and f"{opt_in['key']}-" in [c[-1] for c in opted]


def test_the_runbooks_json_patches_apply_and_do_what_it_says(installed):
    patches = [c for c in commands() if c[:2] == ["kubectl", "patch"]]
    assert len(patches) == 2
    hook = next(o for k, o in installed.items() if k[0] == "MutatingWebhookConfiguration")
    paused = jsonpatch.apply_patch(hook, patches[0][patches[0].index("-p") + 1])
    values = paused["webhooks"][0]["namespaceSelector"]["matchExpressions"][0]["values"]
    assert "enabled" not in values  # no opted-in namespace matches any more
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        target = next(o for k, o in installed.items() if k[0] == kind)
        ca = patches[1][patches[1].index("-p") + 1].replace("$(cat both-ca.b64)", "Q0E=")
        renewed = jsonpatch.apply_patch(target, ca)
        assert renewed["webhooks"][0]["clientConfig"]["caBundle"] == "Q0E="


def test_every_metric_and_alert_the_docs_name_exists():
    exported = {name for metric in Metrics().registry.collect() for name in
                (metric.name, metric.name + "_total", metric.name + "_bucket")}
    pages = [RUNBOOK, (ROOT / "README.md").read_text(), *(p.read_text() for p in (ROOT / "docs").glob("*.md"))]
    alerts = set(re.findall(r"alert: (\w+)", (ROOT / "manifests" / "monitoring" / "prometheusrule.yaml").read_text()))
    for text in pages:
        for name in set(re.findall(r"\bdra_bridge_(?!reporter_)[a-z_]+[a-z]", text)):
            assert name in exported, name
        for alert in set(re.findall(r"\bDraBridge[A-Za-z]+", text)):
            assert alert in alerts, alert


def test_the_walkthrough_binds_the_role_the_manifests_install_and_its_labels_are_the_defaults(installed):
    from app.application import rollout

    roles = [c for c in commands(WALKTHROUGH) if c[:3] == ["kubectl", "create", "clusterrolebinding"]]
    [role] = [w.split("=", 1)[1] for c in roles for w in c if w.startswith("--clusterrole=")]
    assert ("ClusterRole", None, role) in installed
    switches = rollout.Switches()
    assert f"{switches.dra_label}=true" in WALKTHROUGH.replace("\\.", ".") and switches.plugin_label in WALKTHROUGH
