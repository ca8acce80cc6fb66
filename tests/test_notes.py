"""Notes on stderr about a database are said once a day per database, not once per
process: the prompt hook runs a process per prompt, and its "the vector list is
off" note (about 520 characters) went to stderr on every one.

:func:`sqlite_rrf.app.note` with a database remembers what it said in
``$XDG_CACHE_HOME/sqlite-rrf/notes.json`` (``~/.cache/…``), keyed by the database's real
path, the note and the local date; a note it cannot remember is said every time, and a
command never fails because of it. Tested through the hook and the command line, as a
user runs them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict

from conftest import embedding_model, needs_model
from sqlite_rrf.app import ONCE_A_DAY
from sqlite_rrf.store import Store

EPISODES = [
    dict(id="creds", content="Production Postgres credentials are kept in Vault."),
    dict(id="tea", content="The user prefers green tea in the afternoon."),
]
OFF = "the vector list is off"


def env_for(tmp_path: Path) -> Dict[str, str]:
    """No model can be had (offline, an empty Hugging Face cache); the notes' state under
    ``tmp_path/cache``."""
    env = {k: v for k, v in os.environ.items() if k != "SQLITE_RRF_MODEL"}
    hf = tmp_path / "empty-hf-cache"
    hf.mkdir(exist_ok=True)
    env.update(
        HF_HUB_OFFLINE="1",
        HF_HUB_CACHE=str(hf),
        HF_HOME=str(hf),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    return env


def hook(db: Path, env: Dict[str, str]) -> subprocess.CompletedProcess:
    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "hook", str(db), "--scope", "*", "--no-server"],
        input=json.dumps({"prompt": "postgres credentials"}),
        text=True,
        capture_output=True,
        timeout=300,
        env=env,
    )
    assert p.returncode == 0 and "_(id `creds`" in p.stdout, (p.stdout, p.stderr)
    return p


def cli(env: Dict[str, str], *args: str) -> subprocess.CompletedProcess:
    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", *map(str, args)],
        text=True,
        capture_output=True,
        timeout=300,
        env=env,
    )
    assert p.returncode == 0, (p.stdout, p.stderr)
    return p


def plain_db(path: Path) -> Path:
    """The episodes without embeddings: every recall of it says the vector list is off."""
    with Store(path) as s:
        s.add_many(EPISODES)
    return path


def age_the_notes(state: Path) -> None:
    """Make every remembered note yesterday's and older (the next day, as the file says)."""
    said = json.loads(state.read_text(encoding="utf-8"))
    assert said and all(isinstance(v, str) for v in said.values())
    state.write_text(json.dumps({k: "2000-01-01" for k in said}), encoding="utf-8")


def test_a_databases_note_is_said_once_a_day(tmp_path):
    env = env_for(tmp_path)
    db = plain_db(tmp_path / "a.db")
    first = hook(db, env)
    assert first.stderr.count(OFF) == 1 and "no embeddings yet" in first.stderr
    assert ONCE_A_DAY.strip() in first.stderr
    second = hook(db, env)
    assert OFF not in second.stderr and second.stdout == first.stdout
    # the command line on the same database: said already today
    assert OFF not in cli(env, "recall", db, "postgres").stderr
    # the state is where the user's cache is, and names neither the path nor the text
    state = tmp_path / "cache" / "sqlite-rrf" / "notes.json"
    assert (
        state.is_file() and str(db) not in state.read_text() and "vector" not in state.read_text()
    )

    # another database: its own note
    other = tmp_path / "b.db"
    shutil.copyfile(db, other)
    assert hook(other, env).stderr.count(OFF) == 1
    assert OFF not in hook(other, env).stderr

    # the next day: said again, once
    age_the_notes(state)
    assert hook(db, env).stderr.count(OFF) == 1
    assert OFF not in hook(db, env).stderr


def test_a_note_that_cannot_be_remembered_is_said_and_nothing_fails(tmp_path):
    db = plain_db(tmp_path / "a.db")
    # the cache directory is a file: nothing can be written under it
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("x")
    env = dict(env_for(tmp_path), XDG_CACHE_HOME=str(blocked))
    for _ in range(2):
        p = hook(db, env)
        assert p.stderr.count(OFF) == 1 and ONCE_A_DAY.strip() not in p.stderr, p.stderr
        assert "Traceback" not in p.stderr and "unexpected" not in p.stderr
    # a damaged state file: read as empty, written again whole
    env = env_for(tmp_path)
    state = tmp_path / "cache" / "sqlite-rrf" / "notes.json"
    state.parent.mkdir(parents=True)
    state.write_text("{not json")
    assert hook(db, env).stderr.count(OFF) == 1
    assert len(json.loads(state.read_text())) == 1
    assert OFF not in hook(db, env).stderr
    # a relative XDG_CACHE_HOME is ignored (the XDG rule): ~/.cache is used
    home = tmp_path / "home"
    home.mkdir()
    env = dict(env_for(tmp_path), XDG_CACHE_HOME="relative/cache", HOME=str(home))
    assert hook(db, env).stderr.count(OFF) == 1
    assert (home / ".cache" / "sqlite-rrf" / "notes.json").is_file()
    assert not (tmp_path / "relative").exists()


@needs_model
def test_the_hooks_long_note_is_said_once(tmp_path):
    """The note of the issue: a database made with a model file the hook is not given
    (about 520 characters on every prompt before)."""
    from sqlite_rrf.embedding.embedder import Embedder

    model = tmp_path / "minilm.gguf"
    shutil.copyfile(embedding_model(), model)
    db = tmp_path / "m.db"
    with Embedder(str(model)) as emb, Store(db, embedder=emb) as s:
        s.add_many(EPISODES)
    env = env_for(tmp_path)
    first = hook(db, env)
    assert first.stderr.count(OFF) == 1 and str(model) in first.stderr, first.stderr
    assert len(first.stderr) > 300
    assert OFF not in hook(db, env).stderr
    assert first.stdout == hook(db, env).stdout
