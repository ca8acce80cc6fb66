"""Shared fixtures for the sqlite-rrf test suite.

Kept small and generic: an in-memory apsw connection with the extension loaded,
and a helper that packs vectors the way the extension reads them (little-endian
float32 BLOBs, the format of sqlite-vec's vec_f32()).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable, Optional

import apsw
import numpy as np
import pytest

import sqlite_rrf

#: The real GGUF model beside the repository (../shared): the tests' embedding model. This
#: workplace reaches no model hub, so the tests name it through SQLITE_RRF_MODEL (a test of
#: the default model's resolution unsets it, and fills a Hugging Face cache from this file).
SHARED_MODEL = (
    Path(__file__).resolve().parents[2] / "shared" / "models" / "all-MiniLM-L6-v2-f16.gguf"
)
if SHARED_MODEL.is_file():
    os.environ.setdefault("SQLITE_RRF_MODEL", str(SHARED_MODEL))


def embedding_model() -> "Optional[str]":
    """The embedding model the tests embed with ($SQLITE_RRF_MODEL, when that file and
    llama-cpp-python are both there), or None."""
    path = os.environ.get("SQLITE_RRF_MODEL", "")
    if not path or not os.path.isfile(path):
        return None
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return None
    return path


#: Skips a test that embeds when the model or the embed extra is missing.
needs_model = pytest.mark.skipif(
    embedding_model() is None,
    reason="needs the embedding model "
    "(SQLITE_RRF_MODEL) and llama-cpp-python: pip install "
    "'sqlite-rrf[embed]'",
)


def fill_hf_cache(cache_dir: Path, spec: str, source: Path, commit: str = "0" * 39 + "1") -> Path:
    """Put ``source`` into a Hugging Face hub cache at ``cache_dir`` as the file of the
    ``hf:ORG/REPO/FILE`` model ``spec``, laid out as huggingface_hub itself lays out a
    download (blobs/, snapshots/<commit>/, refs/main), so that ``HF_HUB_OFFLINE=1``
    resolves it. Returns the snapshot path."""
    org, repo, filename = spec[len("hf:") :].split("/", 2)
    root = Path(cache_dir) / f"models--{org}--{repo}"
    blob = root / "blobs" / f"sha-{source.stat().st_size}"
    snap = root / "snapshots" / commit / filename
    blob.parent.mkdir(parents=True, exist_ok=True)
    snap.parent.mkdir(parents=True, exist_ok=True)
    (root / "refs").mkdir(exist_ok=True)
    shutil.copyfile(source, blob)
    if snap.exists() or snap.is_symlink():
        snap.unlink()
    snap.symlink_to(os.path.relpath(blob, snap.parent))
    (root / "refs" / "main").write_text(commit)
    return snap


def f32_blob(x) -> bytes:
    """Pack a sequence of numbers as a little-endian float32 BLOB."""
    return np.asarray(x, dtype="<f4").tobytes()


@pytest.fixture
def conn() -> apsw.Connection:
    """A fresh in-memory apsw connection with the rrf extension loaded."""
    c = apsw.Connection(":memory:")
    sqlite_rrf.load(c)
    yield c
    c.close()


@pytest.fixture
def f32() -> Callable[[object], bytes]:
    """The :func:`f32_blob` packer, as a fixture."""
    return f32_blob
