"""A short run of the crash-safety harness (tests/crash/crash.py; ``make crash`` runs
50 kills): SIGKILL of ``sqlite-rrf import`` and of a Store migrating a version-1
database, 10 times at random points; after each kill the database opens, passes
PRAGMA integrity_check and both FTS5 integrity checks, and holds exactly the
committed episodes (an import all or nothing; a migration at a version a whole
migration left, with that version's schema)."""

from __future__ import annotations

import importlib.util
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
KILLS = int(os.environ.get("CRASH_TEST_KILLS", 10))

pytestmark = pytest.mark.slow


def _crash_module():
    spec = importlib.util.spec_from_file_location(
        "rrf_crash", os.path.join(HERE, "crash", "crash.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_kill_during_imports_and_migrations(tmp_path, capsys):
    crash = _crash_module()
    report = crash.run(
        kills=KILLS,
        workdir=str(tmp_path / "crash"),
        import_n=1500,
        migrate_n=1000,
        slow_rows=60_000,
        quiet=True,
    )
    with capsys.disabled():
        print()
        crash.print_report(report)
    assert report["ok"], "\n".join(report["failures"])
    assert report["kills"] >= KILLS
    assert report["kills_by_scenario"]["import"] >= KILLS // 2
    assert report["kills_by_scenario"]["migration"] >= KILLS // 2
    assert not any("PARTIAL" in k or "does not open" in k for k in report["outcomes"])
