from decimal import Decimal

import pytest

from app.common import PolicyError, parse_count, parse_quantity
from app.policy import default_policy, parse_policy
from app.server import Metrics, PolicyHolder


@pytest.mark.parametrize("text, value", [
    ("2", 2), (3, 3), ("1e3", 1000), ("2Ki", 2048), ("1.5Gi", 1610612736), ("500m", Decimal("0.5")),
    ("+4", 4), (".5", Decimal("0.5")),
])
def test_quantities(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "1.2.3", "Gi", "5 Gi", "1e", "x" * 100, "1e999"])
def test_bad_quantities(text):
    with pytest.raises(ValueError):
        parse_quantity(text)


def test_counts_must_be_whole_and_non_negative():
    assert parse_count("8") == 8
    for bad in ("0.5", "-1", "500m"):
        with pytest.raises(ValueError):
            parse_count(bad)


def test_default_policy_covers_every_documented_resource():
    rules = default_policy().migration
    for name in ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb", "nvidia.com/gpu.shared",
                 "nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores",
                 "volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores"]:
        assert rules.rule_for(name), name
    assert rules.rule_for("amd.com/gpu") is None


def test_omitted_sections_keep_defaults_and_given_ones_replace():
    policy = parse_policy("defaults:\n  mode: enforce\n")
    assert policy.defaults.mode == "enforce"
    assert policy.defaults.onTemplateError == "allow"
    assert policy.migration == default_policy().migration


@pytest.mark.parametrize("text, field", [
    ("defaults:\n  mode: loud\n", "defaults.mode"),
    ("bogus: 1\n", "bogus"),
    ("namespaces:\n- mode: warn\n", "namespaces[0]"),
    ("migration:\n  resources:\n  - name: x\n    family: f\n    role: count\n", "migration.resources[0]"),
    ("migration:\n  resources:\n  - pattern: '('\n    family: f\n    role: cores\n", "migration.resources[0]"),
    ("kind: Nope\n", "kind"),
    ("[1, 2]\n", "(top level)"),
    ("a: [\n", "line"),
])
def test_bad_policy_names_the_field(text, field):
    with pytest.raises(PolicyError) as err:
        parse_policy(text, "p.yaml")
    assert str(err.value).startswith("p.yaml")
    assert field in str(err.value)


def test_holder_keeps_last_good_policy_and_counts_rejections(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("defaults:\n  mode: audit\n")
    metrics = Metrics()
    holder = PolicyHolder(str(path), metrics)
    path.write_text("defaults:\n  mode: nope\n")
    assert holder.check() is False
    assert holder.policy.defaults.mode == "audit"
    assert "defaults.mode" in holder.last_error
    assert metrics.policy_reload_errors._value.get() == 1
    path.write_text("defaults:\n  mode: enforce\n")
    assert holder.check() is True and holder.policy.defaults.mode == "enforce"
    path.unlink()
    assert holder.check() is False and holder.policy.defaults.mode == "enforce"


def test_policy_file_that_is_not_utf8_is_refused_and_counted(tmp_path):
    from app.common import PolicyError
    from app.policy import load_policy
    from app.server import Metrics, PolicyHolder

    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"defaults:\n  mode: \xff\xfeenforce\n")
    with pytest.raises(PolicyError, match="not UTF-8"):
        load_policy(str(bad))
    good = tmp_path / "policy.yaml"
    good.write_text("defaults:\n  mode: enforce\n")
    metrics = Metrics()
    holder = PolicyHolder(str(good), metrics)
    good.write_bytes(b"defaults:\n  mode: \xff\n")
    import os
    os.utime(good, ns=(1, 1))  # a different stamp even within the same clock tick
    assert holder.check() is False and "not UTF-8" in holder.last_error
    assert holder.policy.defaults.mode == "enforce"  # the last good policy stays
    assert b"dra_bridge_policy_reload_errors_total 1.0" in metrics.render()


def test_development_certificates_are_all_written_or_none(tmp_path, monkeypatch):
    import errno
    import os

    from app import certs

    real_open = os.open

    def full_disk(path, *args, **kwargs):
        if str(path).endswith("tls.crt.tmp"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", full_disk)  # the disk fills up before the last file
    with pytest.raises(OSError):
        certs.write_bundle(str(tmp_path), ["localhost"])
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == []  # no key without its certificate, no leftovers
    assert certs.ensure_dev_certs(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))  # the next start works
    assert {"tls.crt", "tls.key", "ca.crt"} <= set(os.listdir(tmp_path))
