"""Shared fixtures for the sqlite-rrf test suite.

Kept small and generic: an in-memory apsw connection with the extension loaded,
and a helper that packs vectors the way the extension reads them (little-endian
float32 BLOBs, the format of sqlite-vec's vec_f32()).
"""

from __future__ import annotations

from typing import Callable

import apsw
import numpy as np
import pytest

import sqlite_rrf


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
