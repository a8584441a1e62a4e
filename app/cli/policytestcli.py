"""`dra-bridge policy test`: a policy, resources and the outcomes expected of them (as `kyverno
test` and gator verify take them); every resource goes through the webhooks' own chain
(application.chain), so a test that passes here answers alike in the cluster."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass

from app import dra
from app.common import InputError, read_objects, view_of
from app.application import EveryNamespace, cluster_facts, inventory_source
from app.application.chain import RESULTS, answer
from app.policy import load_policy

from .inputs import choose_inventory

TEST_KIND = "PolicyTest"
# Every field a PolicyTest and one of its results may have: a misspelt one is an error, never a
# check silently skipped (or a default silently used: `inventroy:` would judge the bundled example).
TEST_FIELDS = ("apiVersion", "kind", "metadata", "policy", "inventory", "resources", "namespaces", "results")
RESULT_FIELDS = ("kind", "name", "namespace", "result", "rule", "rules", "user", "groups", "rewritten")


@dataclass
class Case:
    kind: str
    name: str
    namespace: str | None
    result: str
    rules: list[str]
    user: str
    groups: list[str]
    where: str
    rewritten: bool | None = None  # pods: expected onto a generated template (None: not checked)


def run_policy_test(args) -> int:
    failed = total = 0
    for path in _test_files(args.path):
        passed, count = _run_file(path, args.verbose)
        failed += count - passed
        total += count
    print(f"{total - failed} of {total} result(s) as expected" + (f"; {failed} not" if failed else ""))
    return 1 if failed else 0


def _test_files(paths: list[str]) -> list[str]:
    found = []
    for path in paths:
        if os.path.isdir(path):
            found.extend(os.path.join(root, f) for root, _dirs, files in sorted(os.walk(path)) for f in sorted(files)
                         if f.endswith((".yaml", ".yml")) and _is_test(os.path.join(root, f)))
        elif os.path.exists(path):
            found.append(path)
        else:
            raise InputError("PATH", f"{path}: no such file or folder")
    if not found:
        raise InputError("PATH", f"no {TEST_KIND} file in {', '.join(paths)}")
    return found


def _is_test(path: str) -> bool:
    try:
        return any(obj.get("kind") == TEST_KIND for _line, obj in read_objects(path))
    except InputError:
        return False


def _run_file(path: str, verbose: bool) -> tuple[int, int]:
    test = _read_test(path)
    base = os.path.dirname(path)
    policy = load_policy(_beside(base, test, "policy", path))
    named = _beside(base, test, "inventory", path, required=False)
    # A test is a fixture: one that names no inventory runs on the bundled example, and says so.
    inventory, where = choose_inventory(named or "example")
    index = dra.build_index(inventory)
    objects, namespaces = _resources(base, test, path)
    facts = cluster_facts(policy, index, source=inventory_source(index, where), objects=objects.values(),
                          claims_known=True, namespaces=EveryNamespace(namespaces))
    passed = 0
    cases = _cases(test, path)
    print(f"{path}: {test.get('metadata', {}).get('name', '')} ({len(cases)} result(s); judged against: "
          f"{inventory_source(index, where)})")
    for case in cases:
        matches = [o for (kind, ns, name), o in objects.items() if kind == case.kind and name == case.name
                   and (case.namespace is None or ns == case.namespace)]
        if len(matches) != 1:
            raise InputError(case.where, f"{len(matches)} resources are {case.kind} {case.name}"
                             + (f" in {case.namespace}" if case.namespace else "") + ": expected exactly one")
        obj = matches[0]
        namespace = case.namespace or obj["metadata"].get("namespace") or "default"
        got = answer(obj, namespace, policy, facts, case.user, case.groups)
        missing = [r for r in case.rules if r not in got.rules]
        ok = got.result == case.result and not missing and case.rewritten in (None, got.rewritten)
        passed += ok
        said = f"{got.result}" + (f" (rules: {', '.join(sorted(got.rules))})" if got.rules else "") + \
            (", rewritten" if got.rewritten else "")
        line = f"  {'PASS' if ok else 'FAIL'} {case.kind} {namespace}/{case.name}" + _requester(case)
        if ok:
            print(f"{line}: {said}")
        else:
            why = f"expected {case.result}" + (f" by {', '.join(case.rules)}" if case.rules else "") + \
                ({True: ", rewritten", False: ", not rewritten"}.get(case.rewritten, ""))
            print(f"{line}: {why}, got {said}")
        if not ok or verbose:
            for message in got.messages:
                print(f"      {message[:500]}")
    return passed, len(cases)


def _requester(case: Case) -> str:
    """Who the request came from: rules that exclude users or groups are judged on it."""
    return f" (as {case.user}" + (f", groups {', '.join(case.groups)}" if case.groups else "") + ")"


def _read_test(path: str) -> dict:
    tests = [obj for _line, obj in read_objects(path) if obj.get("kind") == TEST_KIND]
    if len(tests) != 1:
        raise InputError(path, f"expected one {TEST_KIND} document, found {len(tests)}")
    _known_fields(tests[0], TEST_FIELDS, path)
    return tests[0]


def _known_fields(raw: dict, known: tuple, where: str) -> None:
    for key in raw:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise InputError(f"{where}: {key}", f"unknown field ({hint}known: {', '.join(known)})")


def _beside(base: str, test: dict, key: str, path: str, required: bool = True) -> str | None:
    value = test.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise InputError(f"{path}: {key}", "required: a file path, relative to the test file")
    return value if os.path.isabs(value) else os.path.join(base, value)


def _resources(base: str, test: dict, path: str) -> tuple[dict, dict]:
    files = test.get("resources")
    if not isinstance(files, list) or not files or not all(isinstance(f, str) for f in files):
        raise InputError(f"{path}: resources", "required: a list of files with the pods, claims and templates")
    objects, namespaces = {}, {}
    for name in files:
        source = name if os.path.isabs(name) else os.path.join(base, name)
        for line, obj in read_objects(source):
            view = view_of(obj)
            if view.kind == "Namespace":
                namespaces[view.name] = view.labels
                continue
            if not view.name:
                raise InputError(f"{source}:{line}: metadata.name", "required to name it in results")
            objects[(view.kind, view.namespace or "default", view.name)] = obj
    for ns, labels in (test.get("namespaces") or {}).items():
        namespaces[ns] = labels or {}
    return objects, namespaces


def _cases(test: dict, path: str) -> list[Case]:
    results = test.get("results")
    if not isinstance(results, list) or not results:
        raise InputError(f"{path}: results", "required: a list of {kind, name, result}")
    cases = []
    for i, raw in enumerate(results):
        where = f"{path}: results[{i}]"
        if not isinstance(raw, dict):
            raise InputError(where, "must be a mapping")
        _known_fields(raw, RESULT_FIELDS, where)
        for key in ("kind", "name", "result"):
            if not isinstance(raw.get(key), str):
                raise InputError(f"{where}.{key}", "required")
        if raw["result"] not in RESULTS:
            raise InputError(f"{where}.result", f"{raw['result']!r}: one of {', '.join(RESULTS)}")
        rules = raw.get("rules") or ([raw["rule"]] if raw.get("rule") else [])
        if raw.get("rewritten") not in (None, True, False):
            raise InputError(f"{where}.rewritten", "true or false")
        cases.append(Case(raw["kind"], raw["name"], raw.get("namespace"), raw["result"], list(rules),
                          str(raw.get("user") or "policy-test"), list(raw.get("groups") or []), where,
                          raw.get("rewritten")))
    return cases

