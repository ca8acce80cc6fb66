"""The command line of replication: ``sqlite-rrf replicate`` and ``sqlite-rrf restore``
(the work is :mod:`sqlite_rrf.app.replicate`'s; docs/cli.md)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from ..app import UserError
from ..app.replicate import (
    DEFAULT_SYNC_INTERVAL,
    check_refresh_output,
    litestream_duration,
    litestream_path,
    refresh,
    replica_url,
    replicate,
    restore,
    run_foreground,
)


def cmd_replicate(args: Any) -> int:
    """``sqlite-rrf replicate DB --to URL``."""
    return replicate(
        args.db,
        args.to,
        config=args.config,
        sync_interval=args.sync_interval,
        check_only=args.check,
        once=args.once,
        exec_cmd=args.exec_cmd,
        force=args.force,
    )


def cmd_restore(args: Any) -> int:
    """``sqlite-rrf restore --from URL -o FILE``."""
    if args.refresh is not None:
        if args.follow or args.timestamp is not None:
            raise UserError(
                "--refresh: a refreshed copy is always the latest (not with "
                "--follow or --timestamp)"
            )
        check_refresh_output(args.output, replica_url(args.src, option="--from"), force=args.force)
        print(
            f"{args.output}: restoring {args.src} every {args.refresh} (Ctrl-C stops; "
            "readers open the copy anew to see the next restore)",
            flush=True,
        )
        try:
            return refresh(args.src, args.output, interval=args.refresh, force=args.force)
        except KeyboardInterrupt:
            return 0
    if args.force:
        raise UserError(
            "--force: only with --refresh (restore and --follow always write a new file)"
        )
    if args.follow:
        if args.timestamp is not None:
            raise UserError("--follow and --timestamp: a followed copy is always the latest")
        url = replica_url(args.src, option="--from")
        ival = litestream_duration(args.interval, "--interval")
        for suffix in ("", "-wal", "-shm"):
            if os.path.lexists(args.output + suffix):
                raise UserError(
                    f"{args.output + suffix} exists; a followed copy starts as a new file"
                )
        print(
            f"{args.output}: restoring {url} and following it every {ival} (Ctrl-C stops; "
            "open the copy read-only)",
            flush=True,
        )
        return run_foreground(
            [litestream_path(), "restore", "-f", "-follow-interval", ival, "-o", args.output, url]
        )
    t0 = time.monotonic()
    report = restore(args.src, args.output, timestamp=args.timestamp)
    secs = time.monotonic() - t0
    if args.json:
        print(
            json.dumps(
                {"output": args.output, "seconds": round(secs, 3), "check": report.as_dict()},
                indent=2,
            )
        )
    else:
        for f in report.findings:
            print(f"{f.part}: {f.message}")
        state = "passes the full check" if report.ok else "FAILS the full check"
        print(f"{args.output}: restored in {secs:.2f} s; {state}")
    return 0 if report.ok else 1


def add_parsers(sub: Any, db_help: str) -> None:
    """Register ``replicate`` and ``restore`` on the command line's subparsers."""
    p = sub.add_parser(
        "replicate",
        help="replicate a memory with Litestream (the replicate "
        "extra) until Ctrl-C: a directory, s3://, sftp://, …",
    )
    p.add_argument("db", help=db_help)
    p.add_argument(
        "--to",
        required=True,
        metavar="URL",
        help="the replica: file:///DIR (or a directory), s3://BUCKET/PATH, "
        "gs://, abs://, sftp://USER@HOST/PATH, …",
    )
    p.add_argument(
        "--config",
        metavar="PATH",
        default=None,
        help="where to write Litestream's configuration (default: DB.litestream.yml); "
        "never the database or its -wal/-shm, and a file replicate did not write only "
        "with --force",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --config file that replicate did not write",
    )
    p.add_argument(
        "--sync-interval",
        default=DEFAULT_SYNC_INTERVAL,
        dest="sync_interval",
        help="how often new writes are shipped: what a lost machine can lose "
        f"(default {DEFAULT_SYNC_INTERVAL})",
    )
    p.add_argument(
        "--check", action="store_true", help="write and check the configuration, do not replicate"
    )
    p.add_argument(
        "--once", action="store_true", help="sync once (a full snapshot the first time) and exit"
    )
    p.add_argument(
        "--exec",
        dest="exec_cmd",
        metavar="CMD",
        default=None,
        help='a command Litestream starts and supervises (e.g. "sqlite-rrf serve '
        'DB --http 8765"); replication stops when it exits',
    )
    p.set_defaults(func=cmd_replicate)

    p = sub.add_parser(
        "restore", help="restore a memory from a Litestream replica into a new file and check it"
    )
    p.add_argument(
        "--from",
        required=True,
        dest="src",
        metavar="URL",
        help="the replica (as given to replicate --to)",
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help="the new database file (never an existing one; with --refresh: the copy "
        "an earlier --refresh from the same replica made, or any file with --force)",
    )
    p.add_argument(
        "--timestamp",
        default=None,
        metavar="T",
        help="restore as of this time: ms since the epoch or an ISO date/time (UTC "
        "when it names no zone); default: the latest",
    )
    p.add_argument(
        "--follow",
        action="store_true",
        help="keep the copy up to date until Ctrl-C (a read replica: open it read-only)",
    )
    p.add_argument(
        "--refresh",
        default=None,
        metavar="D",
        help="restore again every D (e.g. 30s, 5m) until Ctrl-C, each restore "
        "checked and renamed over FILE whole: a read replica never half "
        "written, which sqlite-rrf opens read-only (immutable)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with --refresh: replace an existing FILE that is not an earlier refresh "
        "of this replica (its content is lost)",
    )
    p.add_argument(
        "--interval",
        default="1s",
        help="with --follow: how often the replica is polled (default 1s)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_restore)
