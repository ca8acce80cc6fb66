"""What a command may write over (sqlite_rrf.app.files): never the database it reads nor its
-wal/-shm (symbolic and hard links resolved), never a file it did not write without
force, and never half written."""

from __future__ import annotations

import os

import pytest

from sqlite_rrf.app import UserError
from sqlite_rrf.app.files import (
    atomic_write_text,
    atomic_writer,
    check_output,
    same_file,
    starts_with,
)


@pytest.fixture
def db(tmp_path):
    p = tmp_path / "memory.db"
    p.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    (tmp_path / "memory.db-wal").write_bytes(b"wal")
    return str(p)


def test_same_file_sees_symlinks_and_hard_links(tmp_path, db):
    link = tmp_path / "link.db"
    link.symlink_to(db)
    hard = tmp_path / "hard.db"
    os.link(db, hard)
    other = tmp_path / "other.db"
    other.write_text("x")
    assert same_file(str(link), db)
    assert same_file(str(hard), db)
    assert same_file(str(tmp_path / "sub" / ".." / "memory.db"), db)
    assert not same_file(str(other), db)


@pytest.mark.parametrize("name", ["memory.db", "memory.db-wal", "memory.db-shm"])
def test_never_the_database_or_its_side_files_even_with_force(tmp_path, db, name):
    with pytest.raises(UserError, match="--config: .* is the database"):
        check_output(str(tmp_path / name), option="--config", databases=[db], force=True)


def test_never_the_database_through_links(tmp_path, db):
    (tmp_path / "sym.db").symlink_to(db)
    os.link(db, tmp_path / "hard.db")
    os.link(tmp_path / "memory.db-wal", tmp_path / "hard-wal")
    d2 = tmp_path / "d2"
    d2.mkdir()
    (d2 / "alias.db").symlink_to(db)
    for p in ("sym.db", "hard.db", "hard-wal"):
        with pytest.raises(UserError, match="is the database"):
            check_output(str(tmp_path / p), option="-o", databases=[db], force=True)
    # the database named through a link: its -shm beside the real file is still refused
    with pytest.raises(UserError, match="shm file"):
        check_output(str(tmp_path / "memory.db-shm"), option="-o", databases=[str(d2 / "alias.db")])


def test_foreign_file_needs_force_own_file_does_not(tmp_path, db):
    mine = tmp_path / "mine.yml"
    mine.write_text("# written by me\n")
    theirs = tmp_path / "theirs.yml"
    theirs.write_text("hand: written\n")

    def ours(p):
        return starts_with(p, b"# written by me")

    check_output(str(mine), option="--config", databases=[db], ours=ours)
    with pytest.raises(UserError, match="--config: .*theirs.yml exists and was not written"):
        check_output(str(theirs), option="--config", databases=[db], ours=ours)
    check_output(str(theirs), option="--config", databases=[db], ours=ours, force=True)
    check_output(str(tmp_path / "new.yml"), option="--config", databases=[db])
    with pytest.raises(UserError, match="is a directory"):
        check_output(str(tmp_path), option="-o", force=True)


def test_atomic_write_replaces_whole_or_not_at_all(tmp_path):
    p = tmp_path / "out.txt"
    p.write_text("old\n")
    os.chmod(p, 0o640)
    with pytest.raises(RuntimeError):
        with atomic_writer(str(p)) as f:
            f.write("half")
            raise RuntimeError("stop")
    assert p.read_text() == "old\n"
    assert sorted(os.listdir(tmp_path)) == ["out.txt"]  # no temporary file left
    atomic_write_text(str(p), "new\n")
    assert p.read_text() == "new\n"
    assert os.stat(p).st_mode & 0o777 == 0o640
    # through a symbolic link: the target is replaced, the link stays a link
    link = tmp_path / "link.txt"
    link.symlink_to(p)
    atomic_write_text(str(link), "via link\n")
    assert os.path.islink(link) and p.read_text() == "via link\n"
