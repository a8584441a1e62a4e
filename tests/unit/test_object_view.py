"""One typed view of a Kubernetes object where it enters (issue 43, item 4)."""

import pathlib
import re

from app.common import ObjectView, view_of

APP = pathlib.Path(__file__).parents[2] / "app"
# Where raw metadata is still read, and why: each validates it and names the bad field, reads a
# list's metadata (not an object's), or copies it whole.
RAW_METADATA_READERS = {
    "server/admission.py": "validates the review's object",
    "dra/inventory.py": "validates Nodes and Namespaces, naming the field",
    "migration/podshape.py": "validates a pod, naming the field",
    "kube/client.py": "a list's metadata (resourceVersion, continue)",
    "cli/plancli.py": "copies it without the server's fields",
    "migration/budgets.py": "copies it without the server's fields",
}
RAW_READ = re.compile(r'\.get\("metadata"\)|submap\([^()]*"metadata"\)')  # metadata read as it is
VIEW_FIELDS = r'"(name|namespace|labels|annotations|uid|generateName|resourceVersion|ownerReferences)"'


def test_a_view_reads_what_an_object_holds():
    refs = [{"kind": "Job", "name": "j"}, {"kind": "ReplicaSet", "name": "rs", "controller": True}, "x"]
    pod = {"kind": "Pod", "apiVersion": "v1", "metadata": {
        "name": "p", "namespace": "team-a", "labels": {"app": "a"}, "annotations": {"k": "v"}, "uid": "u1",
        "resourceVersion": "7", "ownerReferences": refs, "deletionTimestamp": "2026-12-06T00:00:00Z"}}
    view = view_of(pod)
    assert (view.kind, view.api_version, view.name, view.namespace, view.uid, view.resource_version) == \
        ("Pod", "v1", "p", "team-a", "u1", "7")
    assert view.labels == {"app": "a"} and view.annotations == {"k": "v"} and view.deleting
    assert view.owner["name"] == "rs" and len(view.owners) == 2 and view.owned_by("Job", "j")
    assert view.key() == ("team-a", "p") and view.shown() == "p"
    view.labels["app"] = "changed"
    assert pod["metadata"]["labels"]["app"] == "a"  # the view is a copy: nothing read changes


def test_fields_of_the_wrong_type_read_as_absent():
    for broken in (None, "pod", {}, {"metadata": None}, {"metadata": []},
                   {"kind": 3, "metadata": {"name": 5, "labels": ["a"], "annotations": "x", "ownerReferences": {}}}):
        assert view_of(broken) == ObjectView()
    assert view_of({"metadata": {"generateName": "web-"}}).shown() == "web-"


def test_no_module_re_derives_metadata_inline():
    """Object metadata is read through the view; raw reads only where the list above says why."""
    found = []
    for path in sorted(APP.rglob("*.py")):
        where = str(path.relative_to(APP))
        if where.startswith("common/"):
            continue
        text = path.read_text()
        if RAW_READ.search(text) and where not in RAW_METADATA_READERS:
            found.append(f"{where}: reads .get('metadata')")
        if re.search(r"metadata_of\([^()]*\)\.get\(" + VIEW_FIELDS, text):
            found.append(f"{where}: metadata_of(...).get(a field the view has)")
    assert not found, found
    stale = [w for w in RAW_METADATA_READERS if not RAW_READ.search((APP / w).read_text())]
    assert not stale, f"no longer raw readers: {stale}"
