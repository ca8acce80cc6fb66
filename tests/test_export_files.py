"""``sqlite-rrf export DB -o FILE`` never writes over the database it reads, nor its
``-wal``/``-shm`` (symbolic and hard links resolved, ``--force`` or not), nor over an
existing file it did not write without ``--force``; an earlier export it replaces."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sqlite_rrf.store import Store


def cli(*argv: object) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SQLITE_RRF_MODEL"}
    env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE="/nonexistent-hf-cache")
    return subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "memory.db"
    with Store(path) as s:
        s.add_many([dict(id=f"n{i}", content=f"note {i}", scope="shop") for i in range(5)])
    # a reader holds the file open, so its -wal and -shm stay beside it
    return path


def test_export_never_writes_over_the_database_or_its_side_files(db, tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "link.db").symlink_to(db)
    os.link(db, tmp_path / "hard.db")
    with Store(db):  # open: the -wal and -shm exist
        assert Path(f"{db}-wal").exists() and Path(f"{db}-shm").exists()
        before = {p: digest(Path(p)) for p in (db, f"{db}-wal")}
        for target, part in [
            (db, "is the database"),
            (f"{db}-wal", "'s wal file"),
            (f"{db}-shm", "'s shm file"),
            (other / "link.db", "is the database"),
            (tmp_path / "hard.db", "is the database"),
        ]:
            for force in ([], ["--force"]):
                p = cli("export", db, "-o", target, *force)
                assert p.returncode == 1 and p.stdout == "", (target, p.stdout, p.stderr)
                line = p.stderr.strip()
                assert line.startswith(f"sqlite-rrf: -o: {target} ") and part in line, line
                assert "never written over it" in line
        assert {p: digest(Path(p)) for p in (db, f"{db}-wal")} == before
    with Store(db) as s:
        assert s.stats()["episodes"] == 5


def test_export_needs_force_for_a_file_it_did_not_write(db, tmp_path):
    mine = tmp_path / "notes.txt"
    mine.write_text("my own notes\n")
    p = cli("export", db, "-o", mine)
    assert p.returncode == 1 and "exists and was not written by this command" in p.stderr
    assert "--force" in p.stderr and mine.read_text() == "my own notes\n"
    p = cli("export", db, "-o", mine, "--force")
    assert p.returncode == 0, p.stderr
    assert len(mine.read_text().splitlines()) == 5

    # an earlier export is replaced without --force, whole
    out = tmp_path / "backup.jsonl"
    assert cli("export", db, "-o", out).returncode == 0
    with Store(db) as s:
        s.add("note 5", id="n5")
    p = cli("export", db, "-o", out)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [x["id"] for x in lines] == [f"n{i}" for i in range(6)]
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]

    # a directory is refused
    p = cli("export", db, "-o", tmp_path)
    assert p.returncode == 1 and "is a directory" in p.stderr
