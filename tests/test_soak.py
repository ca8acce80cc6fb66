"""A short run of the concurrency soak (tests/soak/soak.py; ``make soak`` runs the long
one): 3 writer and 2 reader processes on one new WAL database through Store for a
few seconds, then every check of the soak — acknowledged writes present exactly once
with their last content, nothing from a raised operation visible, PRAGMA
integrity_check, both FTS5 integrity checks, FTS index = episodes, no SQLITE_BUSY
reaching a caller."""

from __future__ import annotations

import importlib.util
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOAK_SECONDS = float(os.environ.get("SOAK_TEST_SECONDS", 8))

pytestmark = pytest.mark.slow


def _soak_module():
    spec = importlib.util.spec_from_file_location("rrf_soak", os.path.join(HERE, "soak", "soak.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_short_soak(tmp_path, capsys):
    soak = _soak_module()
    report = soak.run(seconds=SOAK_SECONDS, writers=3, readers=2,
                      workdir=str(tmp_path / "soak"), quiet=True)
    with capsys.disabled():
        print()
        soak.print_report(report)
    assert report["ok"], "\n".join(report["failures"])
    checks = report["checks"]
    assert report["busy_escaped"] == 0
    assert checks["integrity_check"] == "ok"
    assert checks["fts_integrity_check"] == "ok"
    assert checks["fts_integrity_check_rank1"] == "ok"
    assert checks["missing_acknowledged"] == checks["unexpected_present"] == 0
    assert checks["wrong_content"] == checks["raised_versions_visible"] == 0
    assert checks["episodes"] == checks["expected_episodes"] > 0
    # The run did exercise what it claims to: writes of every kind, failures, recalls.
    ops = report["ops"]
    for kind in ("add", "add_many", "upsert", "delete", "recall_touch"):
        assert ops.get(kind, 0) > 0, (kind, ops)
    assert checks["raised_ops"] > 0
