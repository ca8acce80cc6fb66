"""The refreshed copy: ``sqlite-rrf restore --refresh`` (:func:`refresh`), a read replica
restored again every interval and renamed over the copy whole, and what it may replace
(:func:`check_refresh_output`). docs/scaling.md ("Read replicas") says what it
guarantees."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from typing import Any, Optional, Sequence

from .. import UserError
from ..files import SQLITE_SIDE_FILES, check_output
from . import duration_seconds, litestream_duration, replica_url, restore

__all__ = ["check_refresh_output", "is_own_refresh", "refresh"]


def is_own_refresh(path: str, url: str) -> bool:
    """True when ``path`` is a copy that ``restore --refresh`` made from the replica
    ``url`` (its :data:`~sqlite_rrf.core.sqlite.REPLICA_KEY` names ``url``)."""
    from ...core.sqlite import replica_of  # apsw: not at import (the parser imports this)

    return replica_of(path) == url


def check_refresh_output(output: str, url: str, *, force: bool = False) -> None:
    """Refuse ``-o FILE`` for ``restore --refresh`` when FILE exists and is not this
    command's own earlier restore of ``url`` (unless ``force``), or is a directory or
    not a regular file."""
    check_output(
        output,
        option="-o",
        force=force,
        ours=lambda p: is_own_refresh(p, url),
        what="refreshed copy",
    )


def _stale_side_files(output: str, into: str, suffixes: Sequence[str] = SQLITE_SIDE_FILES) -> None:
    """Move the ``-wal``/``-shm``/``-journal`` beside ``output`` into the directory
    ``into`` (removed with it): they belong to the file about to be replaced. A connection
    that has them open keeps them (its open files); no later open of the new file finds
    them."""
    name = os.path.basename(output)
    for suffix in suffixes:
        side = output + suffix
        if os.path.lexists(side):
            try:
                os.replace(side, os.path.join(into, "old-" + name + suffix))
            except FileNotFoundError:
                pass


def refresh(
    src: str,
    output: str,
    *,
    interval: str = "30s",
    check: bool = True,
    rounds: Optional[int] = None,
    out: Any = None,
    force: bool = False,
) -> int:
    """Keep ``output`` a recent restore of the replica ``src``: every ``interval`` restore
    the replica into a new file in a private directory beside it, run the full check,
    switch that file to DELETE journal mode (a reader needs no ``-wal``/``-shm`` then),
    mark it as this command's (:data:`~sqlite_rrf.core.sqlite.REPLICA_KEY`: the Store opens
    such a copy as immutable, without locks, and never switches its journal mode), move
    aside any ``-wal``/``-shm`` left beside ``output`` (they belong to the old file) and
    rename the new file over ``output`` (atomic).

    A read replica that is never half written: a reader that opens ``output`` gets one
    whole restore; a connection already open keeps reading the restore it opened until it
    is opened again. A restore that fails or fails the check leaves ``output`` as it was
    (said on ``out``). An existing ``output`` must be this command's own earlier restore of
    ``src``, or ``force`` given (:func:`check_refresh_output`, asked again before every
    rename). ``rounds`` stops after that many restores (default: until interrupted).
    Returns 0."""
    from ...core.sqlite import is_wal_file, mark_replica

    out = out or sys.stdout
    url = replica_url(src, option="--from")
    seconds = duration_seconds(litestream_duration(interval, "--refresh"))
    check_refresh_output(output, url, force=force)
    head, name = os.path.split(os.path.abspath(output))
    done, replaced = 0, False
    while rounds is None or done < rounds:
        t0 = time.monotonic()
        work = tempfile.mkdtemp(prefix=f".{name}.", suffix=".restoring", dir=head)
        tmp = os.path.join(work, name)
        try:
            report = restore(url, tmp, check=check)
            if report is not None and not report.ok:
                raise UserError(
                    "the restored copy fails the full check: "
                    + "; ".join(f.message for f in report.findings[:3])
                )
            mark_replica(tmp, url)
            # only the first replace may be over a foreign file (with force); later ones
            # replace the copy this loop made, unless someone put another file there
            check_refresh_output(output, url, force=force and not replaced)
            _stale_side_files(output, work)
            os.replace(tmp, output)
            replaced = True
            if not is_wal_file(output):  # a -wal made meanwhile by the old file's reader
                _stale_side_files(output, work, ("-wal", "-shm"))
            print(
                f"{output}: restored from {url} in {time.monotonic() - t0:.2f} s",
                file=out,
                flush=True,
            )
        except UserError as e:
            print(f"{output}: kept as it was: {e}", file=out, flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        done += 1
        if rounds is not None and done >= rounds:
            break
        time.sleep(max(0.0, seconds - (time.monotonic() - t0)))
    return 0
