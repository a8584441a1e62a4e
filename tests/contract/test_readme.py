"""The README and docs/ as a new user meets them: every YAML block loads, every ```console
example, run in a fresh copy of the repository (its own `make install`, the service from `make
run`), prints exactly what the page shows, and every link leads somewhere."""

import json
import os
import re
import shutil
import subprocess
import time

import kubernetes_validate
import pytest
import yaml

from app.policy import load_policy
from tests.conftest import ROOT
from tests.helpers import clean_env
from tests.readme import blocks, console_steps, run_step

README = (ROOT / "README.md").read_text()
# The README first (its quick start makes what the docs' examples use), then docs/ by name.
PAGES = {"README.md": README, **{f"docs/{p.name}": p.read_text() for p in sorted((ROOT / "docs").glob("*.md"))}}


def test_the_readme_is_short_and_leads_with_what_an_admin_needs():
    """Issue 25: 57 KB, no contents, deploying at line 462. Internals live in docs/."""
    assert len(README.encode()) < 30_000
    headings = [line for line in README.splitlines() if line.startswith("## ")]
    assert headings[:6] == ["## Contents", "## What it does to your workloads", "## Is it safe?", "## Install",
                            "## Undo", "## Try it without a cluster"]
    contents = README.split("## Contents", 1)[1].split("\n## ", 1)[0]
    for heading in headings[1:]:
        assert f"(#{slug(heading[3:])})" in contents, heading


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_link_between_pages_leads_to_a_file_and_heading():
    for name, text in PAGES.items():
        base = (ROOT / name).parent
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            page = (base / path).resolve() if path else (ROOT / name)
            assert page.exists(), (name, target)
            if anchor:
                headings = [slug(h) for h in re.findall(r"^#+ (.+)$", page.read_text(), re.MULTILINE)]
                assert anchor in headings, (name, target, headings)


def test_every_yaml_block_parses_and_loads(tmp_path):
    found = [(f"{name} line {line}", body) for name, text in PAGES.items() for line, body in blocks(text, "yaml")]
    assert found, "the README has YAML examples"
    for line, body in found:
        docs = [d for d in yaml.safe_load_all(body) if d is not None]
        assert docs, f"{line}: an empty YAML block"
        for doc in docs:
            assert isinstance(doc, dict) and doc.get("kind"), f"{line}: not an object"
            if doc["kind"] == "Policy":
                path = tmp_path / "policy.yaml"
                path.write_text(yaml.safe_dump(doc))
                load_policy(str(path))
            elif doc["kind"] == "PolicyTest":
                from app.cli.policytestcli import _cases
                assert _cases(doc, line)
            else:
                kubernetes_validate.validate(doc, "1.34.0", strict=True)


def page_steps():
    return [(name, step) for name, text in PAGES.items() for step in console_steps(text)]


def test_console_examples_are_well_formed():
    steps = [step for _name, step in page_steps()]
    assert len(steps) >= 8
    assert all(s.expected for s in steps if not s.command.rstrip().endswith(("> dry.out", "> real.out",
                                                                           "> plan.json"))), \
        [s.line for s in steps if not s.expected]


def _fresh_copy(target):
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: cannot tell the repository's files from build output")
    for name in listed.stdout.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(1200)
def test_quick_start_in_a_fresh_clone(tmp_path):
    clone, home = tmp_path / "clone", tmp_path / "home"
    clone.mkdir()
    home.mkdir()
    _fresh_copy(clone)
    env = clean_env(home, "VIRTUAL_ENV")
    installed = subprocess.run(["make", "install"], cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]
    # Issue 46: byte-identical on a machine with a kubeconfig (its cluster down) and without one.
    dead = _free_port()
    (home / ".kube").mkdir()
    (home / ".kube" / "config").write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "dev",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{dead}"}}],
        "contexts": [{"name": "dev", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    for kubeconfig in (True, False):
        if not kubeconfig:
            (home / ".kube" / "config").unlink()
        _quick_start_answers_as_written(tmp_path, clone, env)


def _quick_start_answers_as_written(tmp_path, clone, env) -> None:
    port = _free_port()  # the README's 8443 may be taken on this machine; nothing else changes
    log = open(tmp_path / "run.log", "w")
    service = subprocess.Popen(["make", "run"], cwd=clone, env={**env, "DRA_BRIDGE_PORT": str(port)},
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while "listening on" not in (tmp_path / "run.log").read_text():
            assert service.poll() is None and time.monotonic() < deadline, (tmp_path / "run.log").read_text()
            time.sleep(0.2)
        assert "demo mode" in (tmp_path / "run.log").read_text()
        # The quick start's own activation line, before each example, as in the user's terminal.
        [activate] = [body.strip() for _line, body in blocks(README, "sh") if "activate" in body]
        mismatches = []
        for name, step in page_steps():
            command = f"{activate}\n" + step.command.replace("localhost:8443", f"localhost:{port}")
            got = run_step(step.__class__(command, step.expected, step.line), clone, env)
            if got != step.expected:
                mismatches.append(f"{name} line {step.line}: $ {step.command}\n--- {name}\n{step.expected}"
                                  f"--- real\n{got}")
        assert not mismatches, "\n\n".join(mismatches)
    finally:
        os.killpg(service.pid, 15)
        service.wait(20)
        log.close()
