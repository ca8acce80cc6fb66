"""``sqlite-rrf setup``: wire the memory into an agent's host (the work is
:mod:`sqlite_rrf.app.hosts`; ``--check`` is :mod:`sqlite_rrf.app.setup_check`)."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess

from ..app import UserError
from ..app.hosts import (
    DEFAULT_PORT,
    HOOK_TIMEOUT,
    HOSTS,
    HTTP_HOOK_TIMEOUT,
    MCP_NAME,
    TOKEN_ENV,
    UNIT_NAME,
    Options,
    default_db,
    plan,
    resolve_pinned_model,
)


def add_parsers(sub: "argparse._SubParsersAction[argparse.ArgumentParser]", db_help: str) -> None:
    """Register ``setup``'s command line."""
    p = sub.add_parser(
        "setup",
        help="wire the memory into an agent's host (Claude Code, Cursor, Gemini CLI, Codex, "
        "a systemd user unit), or --check the hook a host runs",
        description="Write the prompt hook and the MCP server into the host's own files, "
        "merged with what is there; --undo takes out exactly what it put in.",
    )
    p.add_argument(
        "host",
        nargs="?",
        choices=HOSTS,
        help="claude-code: the UserPromptSubmit hook (.claude/settings.json) and the MCP "
        "server (.mcp.json); cursor: .cursor/mcp.json; gemini: .gemini/settings.json; "
        "codex: .codex/config.toml; "
        f"systemd: the user unit {UNIT_NAME} that keeps `sqlite-rrf serve` running",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="run the configured hook as the host would, with a test prompt, and report "
        "the database, the model, the server, the scope and the p50 of five calls; exit "
        "status 1 on any problem",
    )
    p.add_argument(
        "--project",
        metavar="DIR",
        help="the project whose files are written (default: the top of the git work tree "
        "this directory is in, else this directory)",
    )
    p.add_argument(
        "--user",
        action="store_true",
        help="write your own files (~/.claude/settings.json, ~/.cursor/mcp.json, "
        "~/.gemini/settings.json, ~/.codex/config.toml) instead of the project's: every "
        "project gets it",
    )
    p.add_argument(
        "--db",
        metavar="PATH",
        help=f"{db_help}; created if it does not exist (default: {_shown(default_db())}, "
        "one memory for every project, each in its own scope)",
    )
    p.add_argument(
        "--model",
        metavar="MODEL",
        help="the embedding model pinned into the hook's and the server's command line "
        "(default: $SQLITE_RRF_MODEL, else the default model when it is downloaded)",
    )
    p.add_argument(
        "--no-model",
        action="store_true",
        dest="no_model",
        help="pin no model: recall with BM25, recency and access only",
    )
    p.add_argument("--scope", help="pin the scope (default: the project's, from the directory)")
    p.add_argument(
        "--server",
        action="store_true",
        help=f"use the warm server (`sqlite-rrf serve DB --http PORT`): an HTTP hook "
        f'("type": "http", timeout {HTTP_HOOK_TIMEOUT} s) and its /mcp endpoint, instead '
        f"of a process per prompt (the command hook, timeout {HOOK_TIMEOUT} s)",
    )
    p.add_argument(
        "--url",
        default=f"http://127.0.0.1:{DEFAULT_PORT}",
        help=f"the server's address (default http://127.0.0.1:{DEFAULT_PORT})",
    )
    p.add_argument(
        "--token-env",
        metavar="VAR",
        dest="token_env",
        help=f"send the server's bearer token from this variable (default ${TOKEN_ENV} "
        "when the server is not on loopback)",
    )
    p.add_argument("--name", default=MCP_NAME, help=f"the MCP server's name (default {MCP_NAME})")
    p.add_argument("--dry-run", action="store_true", dest="dry_run", help="print the change")
    p.add_argument("--undo", action="store_true", help="take out what setup put in")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an MCP server of the same name, or a unit file, that is not sqlite-rrf's",
    )
    p.set_defaults(func=run)


def project_dir(given: "str | None") -> str:
    """``--project``, or the top of the git work tree this directory is in (where Claude
    Code is started and reads ``.claude/``), else this directory."""
    if given is not None:
        if not os.path.isdir(given):
            raise UserError(f"--project: {given} is not a directory")
        return os.path.abspath(given)
    here = d = os.getcwd()
    while True:
        if os.path.lexists(os.path.join(d, ".git")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return here
        d = parent


def _shown(path: str) -> str:
    home = os.path.expanduser("~")
    return "~" + path[len(home) :] if path.startswith(home + os.sep) else path


def run(args: argparse.Namespace) -> int:
    if args.check:
        return check(args)
    if args.host is None:
        raise UserError("setup: name the host (" + ", ".join(HOSTS) + ") or --check")
    args.project = project_dir(args.project)
    if args.user and args.host == "systemd":
        raise UserError("--user: a systemd unit is always the user's own")
    db = os.path.abspath(os.path.expanduser(args.db or default_db()))
    model = None if args.undo else resolve_pinned_model(args.model, args.no_model)
    o = Options(
        host=args.host,
        project=args.project,
        user=args.user,
        db=db,
        model=model,
        scope=args.scope,
        server=args.server,
        url=args.url,
        token_env=args.token_env,
        name=args.name,
        force=args.force,
    )
    if args.server and not args.undo and args.host != "systemd":
        _require_server(o)
    p = plan(o, undo=args.undo)
    from ..app.setup_files import apply, diff

    if args.dry_run:
        for c in p.changes:
            print(
                diff(c) if c.changed else f"{c.path}: unchanged ({c.what})",
                end="" if c.changed else "\n",
            )
        for cmd in p.commands:
            print("would run: " + shlex.join(cmd))
        if not args.undo and not os.path.exists(db):
            print(f"would create the memory {db}")
        return 0
    if not args.undo and not os.path.exists(db):
        _make_db(db, model)
    apply(p.changes, undo=args.undo)
    for c in p.changes:
        verb = "unchanged" if not c.changed else ("removed" if c.after is None else "wrote")
        if args.undo and c.changed and c.after is not None:
            verb = "restored"
        print(f"{c.path}: {verb} ({c.what})")
    for cmd in p.commands:
        _run_or_print(cmd)
    for n in p.notes:
        print(n)
    if not args.undo and args.host == "claude-code":
        print(
            "try it: sqlite-rrf setup --check"
            + (" --project " + shlex.quote(args.project) if args.project != os.getcwd() else "")
        )
    return 0


def _make_db(db: str, model: object) -> None:
    from ..app import close_store, open_store

    os.makedirs(os.path.dirname(db), exist_ok=True)
    store = open_store(
        db, "write", model=model if isinstance(model, str) else None, must_exist=False
    )
    close_store(store)  # open_store says "created a new memory at DB" on stderr


def _require_server(o: Options) -> None:
    """``--server`` needs a server that is configured to run: its systemd unit, or one
    that answers now."""
    from ..app.hosts import hook_url, unit_path
    from ..app.setup_check import ping_http

    if os.path.exists(unit_path()) or ping_http(hook_url(o), {}) is not None:
        return
    raise UserError(
        f"--server: no server is configured at {o.url}: run `sqlite-rrf setup systemd` "
        f"(then systemctl --user enable --now {UNIT_NAME}), or start `sqlite-rrf serve DB "
        "--http PORT`; then run this again"
    )


def _run_or_print(cmd: "list[str]") -> None:
    if shutil.which(cmd[0]) is None:
        print(f"{cmd[0]} is not on PATH; run this yourself: {shlex.join(cmd)}")
        return
    print("running: " + shlex.join(cmd))
    p = subprocess.run(cmd)
    if p.returncode != 0:
        raise UserError(f"{cmd[0]} failed (exit status {p.returncode}): {shlex.join(cmd)}")


def check(args: argparse.Namespace) -> int:
    from ..app.setup_check import check as run_check

    report = run_check(project_dir(args.project))
    width = max((len(k) for k, _ in report.facts), default=0)
    for label, text in report.facts:
        print(f"{label.ljust(width)}  {text}")
    for problem, fix in report.problems:
        print(f"PROBLEM: {problem}\n  fix: {fix}")
    print("ok" if report.ok else f"{len(report.problems)} problem(s)")
    return 0 if report.ok else 1
