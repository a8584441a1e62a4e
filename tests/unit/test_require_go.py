"""Issue 33: where a run must have the Go-built judges (CI sets DRA_BRIDGE_REQUIRE_GO), a missing
Go toolchain is an error, not a skip that quietly drops the oracle's tests from the run."""

import pytest

from tests import gobuild
from tests.upstream import oracle


def test_missing_go_skips_by_default_and_fails_where_required(monkeypatch):
    monkeypatch.setattr(gobuild.shutil, "which", lambda _name: None)
    monkeypatch.delenv("DRA_BRIDGE_REQUIRE_GO", raising=False)
    with pytest.raises(oracle.OracleUnavailable, match="Go is not installed"):
        oracle.go_binary()
    monkeypatch.setenv("DRA_BRIDGE_REQUIRE_GO", "1")
    with pytest.raises(RuntimeError, match="this run must build it"):
        oracle.go_binary()
    with pytest.raises(RuntimeError, match="this run must build it"):
        gobuild.go_command("promtool")
