"""What a user meets when something is off: one line saying what and what to do, never a
traceback, and exit codes scripts can rely on. Each command runs as a real process."""

import base64
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import time

import httpx
import pytest
import yaml

from app import certs
from app.cli import main
from tests.conftest import ROOT
from tests.helpers import clean_env
from tests.http import server as srv
from tests.kube.fakeapi import FakeKube

GPU_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "legacy", "namespace": "team-a"},
           "spec": {"containers": [{"name": "c", "image": "cuda",
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def run(tmp_path, *args, env=None, timeout=60):
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, cwd=tmp_path,
                          env=env or clean_env(tmp_path), timeout=timeout)


def one_line_error(result, *words, code=2) -> str:
    assert result.returncode == code, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, result.stderr
    for word in words:
        assert word in errors[0], errors[0]
    return errors[0]


@pytest.fixture
def kube(tmp_path):
    fake = FakeKube().start()
    fake.add_object("team-a", "pods", json.loads(json.dumps(GPU_POD)))
    other = json.loads(json.dumps(GPU_POD))
    other["metadata"] = {"name": "elsewhere", "namespace": "team-b"}
    fake.add_object("team-b", "pods", other)
    yield fake
    fake.stop()


# --- certificates ---------------------------------------------------------------------------

def test_serve_where_certificates_cannot_be_written_says_what_to_mount(tmp_path):
    (tmp_path / "certs").write_text("a file where the folder would be")  # as a root-owned WORKDIR refuses
    line = one_line_error(run(tmp_path, "serve", "--port", "0"), "--tls-cert", "certs/", "mount a certificate")
    assert "DRA_BRIDGE_TLS_CERT" in line


def test_certs_out_naming_a_file(tmp_path):
    (tmp_path / "out").write_text("")
    one_line_error(run(tmp_path, "certs", "--out", "out"), "--out", "is a file")


def test_certs_inject_naming_a_missing_folder_writes_nothing(tmp_path):
    one_line_error(run(tmp_path, "certs", "--out", "deploy", "--inject", "nothere", "--image", "r/x:1"), "--inject", "nothere",
                   "no such folder")
    assert not (tmp_path / "deploy").exists()


def test_certs_never_replace_existing_certificates_unasked(tmp_path):
    assert run(tmp_path, "certs", "--out", "deploy").returncode == 0
    before = (tmp_path / "deploy" / "tls.key").read_bytes()
    one_line_error(run(tmp_path, "certs", "--out", "deploy"), "--out", "--force")
    assert (tmp_path / "deploy" / "tls.key").read_bytes() == before
    assert run(tmp_path, "certs", "--out", "deploy", "--force").returncode == 0
    assert (tmp_path / "deploy" / "tls.key").read_bytes() != before


def test_certs_inject_writes_an_overlay_not_the_base(tmp_path):
    base = tmp_path / "manifests"
    base.mkdir()
    hook = yaml.safe_load((ROOT / "manifests/base/mutatingwebhook.yaml").read_text())
    (base / "hook.yaml").write_text(yaml.safe_dump(hook))
    before = (base / "hook.yaml").read_text()
    result = run(tmp_path, "certs", "--out", "deploy", "--inject", "manifests", "--image", "reg.local/db@sha256:ab")
    assert result.returncode == 0, result.stderr
    assert (base / "hook.yaml").read_text() == before
    overlay = yaml.safe_load((tmp_path / "deploy" / "kustomization.yaml").read_text())
    assert overlay["resources"] == ["../manifests", "tls-secret.yaml"]
    # The Secret as the server stores it: base64 on one line (kustomize's generator wraps it, and
    # every `kubectl apply -k` would then report it configured).
    secret = yaml.safe_load((tmp_path / "deploy" / "tls-secret.yaml").read_text())
    assert secret["type"] == "kubernetes.io/tls" and set(secret["data"]) == {"tls.crt", "tls.key"}
    assert base64.b64decode(secret["data"]["tls.crt"]) == (tmp_path / "deploy" / "tls.crt").read_bytes()
    assert not any("\n" in v for v in secret["data"].values())
    assert overlay["images"] == [{"name": "dra-bridge", "newName": "reg.local/db",
                                  "digest": "sha256:ab"}]
    [patch] = overlay["patches"]
    assert patch["target"] == {"kind": "MutatingWebhookConfiguration", "name": "dra-bridge"}
    assert "kubectl apply -k deploy" in result.stdout


# --- clusters ---------------------------------------------------------------------------------

def kubeconfig_at(path, server):
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "contexts": [{"name": "fake", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))


@pytest.mark.parametrize("command", [["audit"], ["quota"], ["rollout", "status"], ["rollout", "plan"]])
def test_a_cluster_that_does_not_answer_is_one_line_and_exit_3(tmp_path, command):
    """Issue 46: refused, or accepting and never answering (--request-timeout bounds each
    request): one line naming the server and context, exit 3 (never 1, "found something")."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    kubeconfig_at(tmp_path / "kc", f"http://127.0.0.1:{port}")
    line = one_line_error(run(tmp_path, *command, "--kubeconfig", "kc"), f"127.0.0.1:{port}", "refused",
                          "context fake", code=3)
    assert "urllib3" not in line
    with socket.socket() as hanging:
        hanging.bind(("127.0.0.1", 0))
        hanging.listen(8)  # accepts, never answers
        kubeconfig_at(tmp_path / "kc", f"http://127.0.0.1:{hanging.getsockname()[1]}")
        started = time.monotonic()
        result = run(tmp_path, *command, "--kubeconfig", "kc", "--request-timeout", "1")
        assert time.monotonic() - started < 20
        one_line_error(result, f"127.0.0.1:{hanging.getsockname()[1]}", "context fake", code=3)


def test_kubeconfig_naming_a_missing_file(tmp_path):
    for command in (["audit"], ["serve", "--port", "0"], ["reporter", "--node-name", "n",
                                                           "--backend", f"fake:{ROOT}/app/data/fake/l4x4.yaml"]):
        one_line_error(run(tmp_path, *command, "--kubeconfig", "missing/kubeconfig"),
                       "--kubeconfig", "missing/kubeconfig", "no such file")


def test_kubeconfig_with_several_paths_is_merged_as_kubectl_does(tmp_path, kube):
    kube.kubeconfig(tmp_path / "real")
    env = clean_env(tmp_path, KUBECONFIG=os.pathsep.join([str(tmp_path / "absent"), str(tmp_path / "real")]))
    result = run(tmp_path, "audit", "-o", "json", env=env)
    assert result.returncode == 0, result.stderr
    assert {o["name"] for o in json.loads(result.stdout)["objects"]} == {"legacy", "elsewhere"}


def test_audit_honours_kubectl_context_and_namespace(tmp_path, kube):
    config = json.loads(open(kube.kubeconfig(tmp_path / "kc")).read())
    config["contexts"].append({"name": "broken", "context": {"cluster": "nowhere", "user": "fake"}})
    config["clusters"].append({"name": "nowhere", "cluster": {"server": "http://127.0.0.1:9"}})
    config["current-context"] = "broken"
    (tmp_path / "kc").write_text(json.dumps(config))
    result = run(tmp_path, "audit", "--kubeconfig", "kc", "--context", "fake", "-n", "team-a", "-o", "json")
    assert result.returncode == 0, result.stderr
    assert [o["name"] for o in json.loads(result.stdout)["objects"]] == ["legacy"]
    assert any(r.path == "/api/v1/namespaces/team-a/pods" for r in kube.requests)
    one_line_error(run(tmp_path, "audit", "--kubeconfig", "kc", "--context", "prod"), "--context prod",
                   "contexts: fake, broken")


# --- the service's start ----------------------------------------------------------------------

def test_serve_logs_the_real_port_after_binding(tmp_path):
    certs.write_bundle(str(tmp_path / "certs"), ["localhost", "127.0.0.1"])
    log = tmp_path / "log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", "0"],
                                cwd=tmp_path, env=clean_env(tmp_path), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline, port = time.monotonic() + 20, None
        while port is None and time.monotonic() < deadline:
            found = re.search(r"listening on https://127\.0\.0\.1:(\d+)", log.read_text())
            port = int(found[1]) if found else time.sleep(0.1)
        assert port and port != 0, log.read_text()
        # Said once it accepts: the first request after the line is answered.
        with httpx.Client(verify=ssl.create_default_context(cafile=tmp_path / "certs" / "ca.crt")) as client:
            assert client.get(f"https://localhost:{port}/healthz").status_code == 200
        assert "demo mode" in log.read_text()
    finally:
        proc.terminate()
        proc.wait(10)


def test_serve_on_a_port_in_use_names_the_flag_and_variable(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        one_line_error(run(tmp_path, "serve", "--host", "127.0.0.1", "--port", str(port)),
                       f"--port {port}", "DRA_BRIDGE_PORT", "already in use")
        one_line_error(run(tmp_path, "serve", "--host", "127.0.0.1", "--port", "0", "--health-port", str(port)),
                       "--health-port", "DRA_BRIDGE_HEALTH_PORT")


def test_a_variable_no_flag_accepts_is_named(tmp_path):
    one_line_error(run(tmp_path, "serve", env=clean_env(tmp_path, DRA_BRIDGE_PORT="https")), "DRA_BRIDGE_PORT",
                   "'https'")


@pytest.mark.parametrize("content", ["", yaml.safe_dump({"apiVersion": "apps/v1", "kind": "Deployment",
                                                          "metadata": {"name": "d"}})])
@pytest.mark.parametrize("command", [["check", "-f", "{claims}"], ["plan", "-f", "{claims}"], ["classes"],
                                     ["audit", "-f", "{claims}"], ["serve", "--port", "0"]])
def test_a_file_that_is_not_an_inventory_is_refused_naming_it(tmp_path, content, command):
    """Issue 46: a pod file (or an empty one) given as --inventory is not an empty inventory."""
    (tmp_path / "inventory.yaml").write_text(content)
    (tmp_path / "claims.yaml").write_text(yaml.safe_dump(GPU_POD))
    args = [a.format(claims=tmp_path / "claims.yaml") for a in command]
    one_line_error(run(tmp_path, *args, "--inventory", str(tmp_path / "inventory.yaml")),
                   "inventory.yaml", "not an inventory: no ResourceSlice or DeviceClass")


def test_an_inventory_without_devices_warns_and_readyz_says_so(tmp_path):
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}}))
    server = srv.start(tmp_path, "--inventory", str(tmp_path / "inventory.yaml"))
    try:
        with server.client() as client:
            body = client.get("/readyz").json()
        assert body["detail"]["deviceCount"] == 0 and "no devices" in body["detail"]["inventoryWarning"]
        assert "holds no devices" in server.log()
    finally:
        server.stop()


@pytest.mark.parametrize("args, words", [
    (["serve", "--port", "70000"], ["serve: argument --port", "70000 is not a port (0-65535)"]),
    (["reporter", "--health-port", "-1", "--node-name", "n"], ["--health-port", "-1 is not a port"]),
    (["certs", "--out", "out", "--days", "-5"], ["--days", "-5: at least 1"]),
    (["certs", "--out", "out", "--days", "0"], ["--days", "0: at least 1"]),
    (["certs", "--out", "out", "--image", "repo/x:1"], ["--image", "only with --inject"]),
    (["certs", "--out", "out", "--cert-manager"], ["--cert-manager", "only with --inject"]),
    (["certs", "--out", "out", "--audit-cronjob"], ["--audit-cronjob", "only with --inject"]),
    (["audit", "-f", "x.yaml", "-o", "policyreport", "--write-reports"], ["--write-reports", "not -f"]),
    (["audit", "--write-reports"], ["--write-reports", "only with -o policyreport"]),
    (["serve", "--reload-interval", "0"], ["--reload-interval", "more than 0 seconds"]),
    (["serve", "--api-timeout", "nan"], ["--api-timeout", "finite"]),
    (["rollout", "run", "--wave", "0"], ["rollout run: argument --wave", "at least 1"]),
    (["audit", "--inventroy", "live"], ["audit: unrecognized arguments: --inventroy", "did you mean --inventory?"]),
    (["audti"], ["invalid choice: 'audti'", "did you mean audit?"]),
    (["plan", "-f", "{two}"], ["two.yaml:1", "spec.containers[0].resources.limits[nvidia.com/gpu]",
                               "'two' is not a valid quantity"]),
    (["audit", "-f", "{two}"], ["two.yaml:1", "'two' is not a valid quantity"]),
])
def test_bad_numbers_and_flags_are_one_line_exit_2(tmp_path, args, words):
    """Issue 46: ports, days, durations, counts and quantities; a flag or command misspelt gets the
    command's usage and the nearest one; nothing is written."""
    pod = json.loads(json.dumps(GPU_POD))
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "two"
    (tmp_path / "two.yaml").write_text(yaml.safe_dump(pod))
    result = run(tmp_path, *[a.format(two=tmp_path / "two.yaml") for a in args])
    line = one_line_error(result, *words)
    assert line.startswith("dra-bridge: error: ")
    assert not (tmp_path / "out").exists()
    if "unrecognized" in line:
        assert result.stderr.startswith(f"usage: dra-bridge {args[0]}")  # the command's usage, not the top's


def test_serve_uses_a_cluster_only_when_told(tmp_path, kube):
    """Issue 46: a kubeconfig lying around (~/.kube/config, $KUBECONFIG) never turns `make run`
    into writes to that cluster: serve says demo mode and how to use it; --kubeconfig (or
    --context) is the explicit choice, and the start line names the server and context."""
    (tmp_path / ".kube").mkdir()
    kube.kubeconfig(tmp_path / ".kube" / "config")
    server = srv.start(tmp_path, env={"KUBECONFIG": str(tmp_path / ".kube" / "config")})
    try:
        log = server.log()
        assert "demo mode" in log and f"--kubeconfig {tmp_path / '.kube' / 'config'}" in log
        assert "kubernetes API:" not in log and not kube.requests
    finally:
        server.stop()
    for explicit in (("--kubeconfig", str(tmp_path / ".kube" / "config")), ("--context", "fake")):
        server = srv.start(tmp_path, *explicit)
        try:
            line = next(s for s in server.log().splitlines() if "kubernetes API:" in s)
            assert kube.url in line and "context fake" in line and ".kube/config" in line
            assert "demo mode" not in server.log()
        finally:
            server.stop()
    line = one_line_error(run(tmp_path, "serve", "--demo", "--kubeconfig", str(tmp_path / ".kube" / "config")),
                          "--demo", "leave out --kubeconfig")


# --- exit codes ---------------------------------------------------------------------------------

def test_plan_and_audit_exit_1_when_an_object_needs_attention(tmp_path):
    pod = json.loads(json.dumps(GPU_POD))
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "0.5"
    (tmp_path / "half.yaml").write_text(yaml.safe_dump(pod))
    for command in ("plan", "audit"):
        result = run(tmp_path, command, "-f", "half.yaml")
        assert result.returncode == 1, (command, result.stdout, result.stderr)
        assert "needs-attention" in result.stdout + result.stderr
    (tmp_path / "fine.yaml").write_text(yaml.safe_dump(GPU_POD))
    assert run(tmp_path, "plan", "-f", "fine.yaml").returncode == 0


def test_check_on_a_file_without_claims_says_so_and_exits_2(tmp_path):
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(GPU_POD))
    one_line_error(run(tmp_path, "check", "-f", "pod.yaml", "--inventory", "example"), "pod.yaml", "no ResourceClaim or ResourceClaimTemplate")


# --- help ---------------------------------------------------------------------------------------

def test_help_of_every_command_gives_each_flag_help_default_and_variable(capsys):
    from app.cli.main import build_parser

    parser = build_parser()
    [commands] = [a for a in parser._actions if a.dest == "command"]
    assert set(commands.choices) == {"serve", "certs", "plan", "check", "audit", "classes", "reporter", "rollout",
                                     "policy", "quota", "completion"}
    [actions] = [a for a in commands.choices["rollout"]._actions if a.dest == "action"]
    assert set(actions.choices) == {"plan", "run", "undo", "status"}
    [policy] = [a for a in commands.choices["policy"]._actions if a.dest == "action"]
    assert set(policy.choices) == {"test", "compile"}
    every = {**commands.choices, **{f"rollout {k}": v for k, v in actions.choices.items()},
             **{f"policy {k}": v for k, v in policy.choices.items()}}
    for name, sub in every.items():
        assert "exit codes:" in (sub.epilog or ""), name
        if name not in ("serve", "reporter"):  # says which variables apply, if any
            assert "DRA_BRIDGE_" in sub.epilog, name
        for action in sub._actions:
            if action.dest in ("help", "max_rounds", "action", "shell"):
                continue
            assert action.help and ("default:" in action.help or "required" in action.help), (name, action.dest)
            if name in ("serve", "reporter") and action.option_strings[0] not in ("--once", "-o", "--with-classes"):
                assert "env DRA_BRIDGE_" in action.help, (name, action.dest)
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert all(word in out for word in ("serve", "plan", "check", "audit", "classes", "certs", "reporter",
                                        "rollout", "policy", "quota", "completion", "kubectl dra-bridge"))
    listed = out.split("positional arguments:", 1)[1]
    for command in commands.choices:  # each command once, not in a second hand-kept list
        assert len(re.findall(rf"^\s+{command}\s", out, re.M)) == 1 and command in listed, command


def test_kubeconfig_is_chosen_in_kubectls_order(tmp_path, monkeypatch):
    from app.kube.client import kubeconfig_paths

    flag, listed, default = tmp_path / "flag", tmp_path / "listed", tmp_path / ".kube" / "config"
    default.parent.mkdir()
    for path in (flag, listed, default):
        path.write_text("{}")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert kubeconfig_paths(str(flag), {"KUBECONFIG": str(listed)}) == str(flag)
    assert kubeconfig_paths(None, {"KUBECONFIG": f"{tmp_path / 'gone'}{os.pathsep}{listed}"}) == str(listed)
    assert kubeconfig_paths(None, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) == str(default)  # files before in-cluster
    default.unlink()
    assert kubeconfig_paths(None, {}) is None


@pytest.mark.parametrize("words, wanted, unwanted", [
    (["dra-bridge", ""], ["audit", "rollout", "completion"], []),
    (["dra-bridge", "rollout", ""], ["plan", "run", "undo", "status"], []),
    (["dra-bridge", "rollout", "plan", "--wa"], ["--wave-size"], []),
    (["dra-bridge", "audit", "--inv"], ["--inventory"], []),
    (["dra-bridge", "reporter", "--max"], [], ["--max-rounds"]),  # hidden flags stay hidden
    # Issue 55: values too, each command's own
    (["dra-bridge", "audit", "-o", ""], ["table", "wide", "json", "policyreport"], ["--policy"]),
    (["dra-bridge", "plan", "-o", "d"], ["diff"], ["table"]),
    (["dra-bridge", "check", "--inventory", ""], ["live", "example"], []),
    (["dra-bridge", "rollout", "status", "--output", ""], ["table", "json", "yaml"], []),
])
def test_completion_offers_each_commands_own_words(tmp_path, words, wanted, unwanted):
    """Issue 46: `source <(dra-bridge completion bash)` completes commands, actions and flags from
    the one parser; kubectl's plugin completion answers the same."""
    script = run(tmp_path, "completion", "bash").stdout
    probe = (f"{script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}; "
             "_dra_bridge; printf '%s\\n' \"${COMPREPLY[@]}\"")
    offered = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30).stdout.split()
    assert set(wanted) <= set(offered) and not set(unwanted) & set(offered), offered
    from app.cli.completion import candidates, tree
    from app.cli.main import build_parser
    assert set(wanted) <= set(candidates(words[1:], tree(build_parser())))
    for shell in ("zsh", "fish"):
        assert run(tmp_path, "completion", shell).returncode == 0


@pytest.mark.parametrize("args", [["check", "-f", str(ROOT / "examples" / "claims" / "one-gpu.yaml"),
                                   "--inventory", "example"],
                                  ["audit", "-f", str(ROOT / "examples" / "workloads" / "gpu-pod.yaml")],
                                  ["rollout", "status", "-f", str(ROOT / "examples" / "cluster")],
                                  ["rollout", "plan", "-f", str(ROOT / "examples" / "cluster")]])
def test_json_and_yaml_are_the_same_content(tmp_path, args):
    """Issue 46: kubectl's vocabulary: -o json and -o yaml print one content."""
    as_json = run(tmp_path, *args, "-o", "json")
    as_yaml = run(tmp_path, *args, "-o", "yaml")
    assert as_json.returncode == as_yaml.returncode and as_json.returncode in (0, 1), as_json.stderr
    assert json.loads(as_json.stdout) == yaml.safe_load(as_yaml.stdout)


@pytest.mark.parametrize("args", [["plan", "-f", str(ROOT / "examples" / "workloads")],
                                  ["quota", "-f", str(ROOT / "examples" / "quota")]])
def test_objects_to_apply_are_the_same_in_json_and_yaml(tmp_path, args):
    """plan and quota print objects: -o yaml a stream for `kubectl apply -f -`, -o json one List
    of the same objects (plan's per-object verdicts are `-o report`)."""
    as_json = run(tmp_path, *args, "-o", "json")
    as_yaml = run(tmp_path, *args, "-o", "yaml")
    assert as_json.returncode == as_yaml.returncode and as_json.returncode in (0, 1), as_json.stderr
    listed = json.loads(as_json.stdout)
    assert listed["kind"] == "List" and listed["items"]
    assert listed["items"] == [d for d in yaml.safe_load_all(as_yaml.stdout) if d]
    report = json.loads(run(tmp_path, *args, "-o", "report").stdout) if args[0] == "plan" else None
    assert report is None or report["objects"]


def test_certs_inject_needs_the_image_it_deploys(tmp_path):
    one_line_error(run(tmp_path, "certs", "--out", "deploy", "--inject", str(ROOT / "manifests")),
                   "--image", "required with --inject", "REGISTRY/dra-bridge:TAG")
    assert not (tmp_path / "deploy").exists()


def test_certs_inject_of_the_entry_point_takes_its_base(tmp_path):
    """manifests/ names its image in manifests/image and refuses to render without it: the overlay
    builds on manifests/base and sets the image itself."""
    result = run(tmp_path, "certs", "--out", "deploy", "--inject", str(ROOT / "manifests"), "--image", "r/x:1")
    assert result.returncode == 0, result.stderr
    overlay = yaml.safe_load((tmp_path / "deploy" / "kustomization.yaml").read_text())
    assert overlay["resources"] == [os.path.relpath(ROOT / "manifests" / "base", tmp_path / "deploy"), "tls-secret.yaml"]
    one_line_error(run(tmp_path, "certs", "--out", "d2", "--inject", str(ROOT / "manifests/cert-manager"),
                       "--image", "r/x:1"), "--inject", "composes components", "name the base")


def test_context_values_come_from_the_kubeconfig(tmp_path, monkeypatch):
    """`--context <TAB>` offers the contexts of the kubeconfig kubectl would read."""
    import yaml

    from app.cli.completion import candidates, tree
    from app.cli.main import build_parser
    config = tmp_path / "config"
    config.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "lab",
                                      "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                                      "users": [{"name": "u", "user": {}}],
                                      "contexts": [{"name": n, "context": {"cluster": "c", "user": "u"}}
                                                   for n in ("lab", "prod-eu")]}))
    monkeypatch.setenv("KUBECONFIG", str(config))
    assert candidates(["audit", "--context", "p"], tree(build_parser())) == ["prod-eu"]
    assert candidates(["quota", "--context", ""], tree(build_parser())) == ["lab", "prod-eu"]


def test_completion_offers_the_clusters_namespaces_and_fish_completes_values(tmp_path):
    """Issue 55: namespaces complete where cheap (one list call kubectl makes, 2 s at most), and
    fish completes values, not only flags."""
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "kubectl").write_text("#!/bin/sh\ncase \"$*\" in *'get namespaces'*) printf 'team-a\\nteam-b\\n';; esac\n")
    (tools / "kubectl").chmod(0o755)
    script = run(tmp_path, "completion", "bash").stdout
    probe = (f"{script}\nCOMP_WORDS=(dra-bridge audit -n team-); COMP_CWORD=3; _dra_bridge; "
             "printf '%s\\n' \"${COMPREPLY[@]}\"")
    offered = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30,
                             env={**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"}).stdout.split()
    assert offered == ["team-a", "team-b"], offered
    fish = run(tmp_path, "completion", "fish").stdout
    assert "-l output -x -a 'table wide json yaml policyreport'" in fish
    assert "-l namespace -x -a '(kubectl get namespaces" in fish
    assert "-l context -x -a '(kubectl config get-contexts -o name" in fish
