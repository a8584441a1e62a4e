import json
import os
import subprocess
import sys

import kubernetes_validate
import pytest
import yaml
from cryptography import x509

from app.cli import main
from tests.conftest import ROOT
from tests.http import server as srv

EXAMPLES = ROOT / "examples"


def run(*args, cwd=None, stdin=None):
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, input=stdin, timeout=60)


def test_certs_have_service_sans_and_chain_to_ca(tmp_path):
    assert main(["certs", "--service", "hook", "--namespace", "gpu", "--out", str(tmp_path)]) == 0
    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.crt").read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert {"hook", "hook.gpu", "hook.gpu.svc"} <= set(sans)
    cert.verify_directly_issued_by(ca)
    assert oct((tmp_path / "tls.key").stat().st_mode & 0o777) == "0o600"


def test_serve_refuses_a_bad_initial_policy_naming_the_field(tmp_path):
    bad = tmp_path / "policy.yaml"
    bad.write_text("migration:\n  claimName: Not_A_Label\n  resources: []\n")
    result = run("serve", "--policy", str(bad), "--port", "0", cwd=tmp_path)
    assert result.returncode == 2
    assert "migration.claimName" in result.stderr and "Traceback" not in result.stderr


def test_serve_with_no_flags_generates_dev_certs_and_starts(tmp_path):
    server = srv.start(tmp_path, certs=False)
    try:
        assert (tmp_path / "certs" / "ca.crt").exists()
        with server.client() as c:
            assert c.get("/readyz").json()["checks"] == {"certificates": True, "inventory": True}
        assert "bundled EXAMPLE inventory" in server.log()
    finally:
        server.stop()


def test_plan_yaml_output_is_applyable(tmp_path):
    # Volcano's pods are migrated only where the policy says its scheduler allocates claims.
    default = (ROOT / "app" / "data" / "default-policy.yaml").read_text()
    policy = tmp_path / "policy.yaml"
    # ...and a share costs a whole GPU only where the policy accepts it (issue 23).
    policy.write_text(default.replace("draSchedulers: [default-scheduler]", "draSchedulers: [default-scheduler, volcano]")
                      .replace("fractional: legacy", "fractional: wholeDevice"))
    inputs = ["-f", str(EXAMPLES / "workloads" / "ampere-16gb-pod.yaml"),
              "-f", str(EXAMPLES / "workloads" / "volcano-vgpu-deployment.yaml"), "-n", "team-a"]
    without = run("plan", *inputs, "-o", "report")
    paths = {o["name"]: o["path"] for o in __import__("json").loads(without.stdout)["objects"]}
    assert paths == {"nbody-ampere": "rewrite", "notebook-vgpu": "legacy"}
    result = run("plan", *inputs, "--policy", str(policy))
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    kinds = [d["kind"] for d in docs]
    assert kinds.count("ResourceClaimTemplate") == 2 and "Pod" in kinds and "Deployment" in kinds
    for doc in docs:
        kubernetes_validate.validate(doc, "1.34.0", strict=True)
    assert "summary: migrated 2" in result.stderr


def test_plan_reads_stdin_and_reports_needs_attention():
    manifest = yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                               "spec": {"containers": [{"name": "c", "image": "i",
                                                        "resources": {"limits": {"nvidia.com/gpu": "0.5"}}}]}})
    result = run("plan", "-f", "-", "-o", "report", stdin=manifest)
    assert result.returncode == 1  # someone has to look at it
    [row] = __import__("json").loads(result.stdout)["objects"]
    assert row["status"] == "needs-attention" and "not a whole number" in row["reasons"][0]
    assert any(line.startswith("needs-attention") and "Pod/p" in line for line in result.stderr.splitlines())


@pytest.mark.parametrize("text, where", [("a: [1,\n", "<stdin>:"), ("- just\n- a list\n", "<stdin>")])
def test_plan_bad_input_exits_2_naming_the_source(text, where):
    result = run("plan", "-f", "-", stdin=text)
    assert result.returncode == 2
    assert where in result.stderr and "Traceback" not in result.stderr


def test_check_reports_verdicts_and_exit_codes(tmp_path):
    ok = run("check", "-f", str(EXAMPLES / "claims" / "one-gpu.yaml"), "--inventory", "example")
    assert ok.returncode == 0 and ok.stdout.startswith("satisfiable")
    bad = run("check", "-f", str(EXAMPLES / "claims" / "four-mig-1g5gb-same-gpu.yaml"), "-o", "json",
              "--inventory", "example")
    assert bad.returncode == 1
    [row] = __import__("json").loads(bad.stdout)
    assert row["status"] == "never" and "mig-1g-5gb" in row["message"] and len(row["closest"]) == 3
    slices = tmp_path / "slices.yaml"
    slices.write_text(run("reporter", "--once", "--backend", f"fake:{ROOT / 'app/data/fake/h100x8.yaml'}",
                          "--node-name", "n1").stdout + "---\n" + yaml.safe_dump(
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
         "spec": {"selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}))
    on_h100 = run("check", "-f", str(EXAMPLES / "claims" / "a100-gpu.yaml"),
                  "--inventory", str(slices))
    assert on_h100.returncode == 1 and "productName" in on_h100.stdout  # an A100 selector on an H100-only node
    missing = run("check", "-f", "/nonexistent.yaml", "--inventory", "example")
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_table_cells_are_cut_at_a_word_and_say_so():
    from app.cli.output import clip

    text = "legacy: the planned claim could never be satisfied here (request server: no device matches)"
    assert clip(text, 200) == text
    cut = clip(text, 40)
    assert len(cut) <= 40 and cut.endswith(" ...") and text.startswith(cut[:-4])
    assert cut[:-4].split()[-1] in text.split()  # a whole word before the cut


def test_issue_25_plan_yaml_is_ready_for_kubectl_apply(tmp_path):
    """No YAML anchors (the same selectors list in two alternatives printed `&id001` /
    `*id001`), no CEL folded across lines, an AdmissionReview stands for its object, and the
    fields the server sets are left out."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "uid": "abc", "resourceVersion": "7",
                                                          "managedFields": [{"manager": "x"}],
                                                          "annotations": {"nvidia.com/use-gputype": "A100,V100"}},
           "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 2}}}]},
           "status": {"phase": "Pending"}}
    review_file = tmp_path / "review.json"
    review_file.write_text(json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                       "request": {"uid": "u", "namespace": "ml", "object": pod}}))
    result = run("plan", "-f", str(review_file), "-o", "yaml")
    assert "&id" not in result.stdout and "*id" not in result.stdout, result.stdout
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert [d["kind"] for d in docs] == ["ResourceClaimTemplate", "Pod"]
    planned = docs[1]
    assert planned["metadata"]["namespace"] == "ml" and "status" not in planned
    assert not {"uid", "resourceVersion", "managedFields"} & set(planned["metadata"])
    for line in result.stdout.splitlines():  # every CEL expression whole on its line
        if "expression:" in line:
            assert line.rstrip().endswith(("'", '"', ")")), line
    for doc in docs:
        kubernetes_validate.validate(doc, "1.34.0", strict=True)


BAD_KUBECONFIGS = {
    "not YAML": "clusters: [oops\n",
    "a list": "- a\n",
    "a scalar": "just a string\n",
    "wrong types": ("apiVersion: v1\nkind: Config\ncurrent-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                    "clusters: [{name: c, cluster: {server: 5}}]\nusers: [{name: u, user: {}}]\n"),
}


@pytest.mark.parametrize("shape", sorted(BAD_KUBECONFIGS))
@pytest.mark.parametrize("command", [["audit"], ["serve", "--port", "0"],
                                     ["reporter", "--backend", f"fake:{ROOT / 'app' / 'data' / 'fake' / 'l4x4.yaml'}",
                                      "--node-name", "n", "--max-rounds", "1", "--health-port", "0"]])
def test_issue_25_a_bad_kubeconfig_is_one_line_and_exit_2(tmp_path, shape, command):
    path = tmp_path / "config"
    path.write_text(BAD_KUBECONFIGS[shape])
    # serve reads no $KUBECONFIG (issue 46: a cluster only when told), so only its flag applies.
    for env_or_flag in ("flag",) if command[0] == "serve" else ("flag", "env"):
        args = [*command, "--kubeconfig", str(path)] if env_or_flag == "flag" else command
        env = {**os.environ, "KUBECONFIG": str(path)} if env_or_flag == "env" else None
        result = subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, cwd=ROOT,
                                timeout=60, env=env)
        assert result.returncode == 2, (env_or_flag, result.stderr[-500:])
        assert "Traceback" not in result.stderr
        assert result.stderr.strip().splitlines()[-1].startswith("dra-bridge: error: kubeconfig")


def test_issue_25_empty_inputs_are_an_error_and_check_says_which_inventory(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing here\n")
    for command in (["plan", "-f", str(empty)], ["audit", "-f", str(empty)],
                    ["check", "-f", str(empty), "--inventory", "example"]):
        result = run(*command)
        assert result.returncode == 2 and "Traceback" not in result.stderr, (command, result.stderr)
        assert result.stderr.strip().splitlines()[-1].startswith(f"dra-bridge: error: {empty}"), result.stderr
    unnamed = run("check", "-f", str(EXAMPLES / "claims" / "one-gpu.yaml"))
    assert unnamed.returncode == 2 and "dra-bridge: error: --inventory" in unnamed.stderr  # none judges nothing
    bundled = run("check", "-f", str(EXAMPLES / "claims" / "one-gpu.yaml"), "--inventory", "example")
    assert bundled.returncode == 0 and "judged against: the bundled EXAMPLE inventory" in bundled.stderr
    chosen = run("check", "-f", str(EXAMPLES / "claims" / "one-gpu.yaml"), "--inventory",
                 str(ROOT / "app" / "data" / "example-inventory.yaml"))
    assert chosen.returncode == 0 and "judged against: inventory " in chosen.stderr and "EXAMPLE" not in chosen.stderr


def test_issue_25_diff_shows_new_templates_and_wide_shows_every_reason(tmp_path):
    result = run("plan", "-f", str(EXAMPLES / "workloads" / "gpu-pod.yaml"), "-o", "diff")
    assert "--- /dev/null" in result.stdout and "+kind: ResourceClaimTemplate" in result.stdout
    assert "(legacy)" in result.stdout and "(dra)" in result.stdout  # and the object's own diff
    share = tmp_path / "share.yaml"
    share.write_text(yaml.safe_dump({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ts"}, "spec": {
        "replicas": 10, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {
            "containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1,
                                                                               "nvidia.com/gpumem": 4000}}}]}}}}))
    narrow = run("audit", "-f", str(share)).stdout
    wide = run("audit", "-f", str(share), "-o", "wide").stdout
    assert "10 whole GPU(s)" not in narrow and "for 10 replicas: 10 whole GPU(s)" in wide  # the cost, uncut
    assert "for 10 replicas: 10 whole GPU(s)" in run("plan", "-f", str(share), "--wide").stderr
