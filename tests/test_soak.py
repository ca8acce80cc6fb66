"""Short runs of the concurrency soaks (``make soak`` runs the long ones).

tests/soak/soak.py: 3 writer and 2 reader processes on one new WAL database through
Store for a few seconds, then every check of the soak — acknowledged writes present
exactly once with their last content, nothing from a raised operation visible, PRAGMA
integrity_check, both FTS5 integrity checks, FTS index = episodes, no SQLITE_BUSY
reaching a caller.

tests/soak/latency.py: writers alone, and with touching
recall readers of pools 'recent' and 'all', and the control that holds the write lock
for the whole recall the way Store did before. The figures must exist and no
BusyError may reach a caller; the speeds are shown, never asserted."""

from __future__ import annotations

import importlib.util
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOAK_SECONDS = float(os.environ.get("SOAK_TEST_SECONDS", 8))

pytestmark = pytest.mark.slow


def _soak_module(name: str = "soak"):
    spec = importlib.util.spec_from_file_location(
        f"rrf_{name}", os.path.join(HERE, "soak", f"{name}.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_short_soak(tmp_path, capsys):
    soak = _soak_module()
    report = soak.run(
        seconds=SOAK_SECONDS, writers=3, readers=2, workdir=str(tmp_path / "soak"), quiet=True
    )
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


def test_short_latency_soak(tmp_path, capsys):
    lat = _soak_module("latency")
    report = lat.run(
        episodes=2000,
        dim=64,
        seconds=3,
        writers=2,
        rate=25,
        configs=["alone", "recent", "all", "control"],
        workdir=str(tmp_path / "latency"),
        quiet=True,
    )
    with capsys.disabled():
        print()
        lat.print_report(report)
    assert report["ok"], "\n".join(report["failures"])
    assert report["busy_escaped"] == 0
    configs = report["configs"]
    assert list(configs) == ["alone", "recent", "all", "control"]
    for name, f in configs.items():
        assert f["writer_ops"] > 0, name
        assert None not in f["writer_ms"].values(), (name, f["writer_ms"])
        assert f["writer_ms"]["p50"] <= f["writer_ms"]["p99"] <= f["writer_ms"]["max"]
        assert f["busy_escaped"] == 0 or "control_findings" in f, name
        assert f["unexpected_exceptions"] == 0 or "control_findings" in f, name
        assert f["checks"] == {
            "integrity_check": "ok",
            "fts_integrity_check": "ok",
            "fts_integrity_check_rank1": "ok",
        }, name
    assert configs["alone"]["recalls"] == {}
    for name, pool in (("recent", "recent"), ("all", "all")):
        rec = configs[name]["recalls"][pool]
        assert rec["n"] > 0 and rec["p50_ms"] is not None, name
        # the recalls that returned hits touched them, and the touches were measured; a
        # touch is best effort (it waits 50 ms for a writer's lock, then gives up), so on
        # a loaded machine a few may give up, never most of them
        done, skipped = configs[name]["touched"], configs[name]["not_touched"]
        assert done > 0 and skipped <= done // 10, (name, done, skipped)
        assert configs[name]["touch_ms"]["n"] == rec["n"], name
    # the control (the old way: the write lock for the whole statement) made writers wait:
    # the lock-wait meter sees what it is there to see
    assert configs["control"]["recalls"]["all-locked"]["n"] > 0
    assert configs["control"]["writer_ops_that_waited_for_a_lock"] > 0
    assert "| control |" in lat.table(report)


def test_busy_meter_sleeps_on_sqlites_schedule_and_gives_up_at_the_timeout():
    lat = _soak_module("latency")
    meter = lat.BusyMeter(timeout_ms=30)
    answers = [meter(i) for i in range(10)]
    # 1 + 2 + 5 + 10 = 18 ms, then 12 more (the rest of the 30), then it gives up
    assert answers == [True] * 5 + [False] * 5
    assert meter.calls == 5
    assert 0.028 <= meter.slept < 1.0
    meter.reset()
    assert meter.slept == 0.0 and meter.calls == 0
    assert lat.pct([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0
    assert lat.pct([5.0, 1.0, 3.0, 2.0, 4.0], 99) == 5.0
    assert lat.pct([], 50) is None
