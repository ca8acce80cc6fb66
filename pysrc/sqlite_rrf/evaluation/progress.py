"""Progress bars of the evaluation (tqdm, when it is installed and asked for)."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["progress_bar"]


def progress_bar(total: int, desc: str, progress: bool, unit: str = "query") -> Any:
    """A tqdm bar on stderr of ``total`` steps, or None when ``progress`` is False or tqdm
    is not installed (callers skip ``update``/``close`` on None)."""
    if not progress:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm comes with the embed and bench extras
        return None
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True)
