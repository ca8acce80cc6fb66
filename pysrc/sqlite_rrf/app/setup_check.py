"""``sqlite-rrf setup --check``: the prompt hook a host would run from a project, tried as
the host runs it, and each problem found said with its fix.

It finds the sqlite-rrf ``UserPromptSubmit`` hooks in Claude Code's settings (the
project's ``.claude/settings.local.json`` and ``.claude/settings.json``, then
``~/.claude/settings.json``), and for the hook that runs reports: the database and its
schema (:func:`sqlite_rrf.doctor.check_path`); whether the model the hook names loads and
matches the database's (its dimension and fingerprint); whether a server answers (the
hook's socket, or the HTTP hook's URL); the scope the hook recalls from this directory and
what the database holds there; and :data:`CALLS` runs of the hook with :data:`TEST_PROMPT`
(JSON on stdin for a command hook, a POST for an HTTP hook), their p50.
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .errors import UserError
from .hosts import HOOK_EVENT, HOOK_PATH, hook_post_url, is_hook_command
from .setup_files import load_json, read_bytes

#: The prompt the check sends the hook.
TEST_PROMPT = "What do you remember about this project?"
#: How many times the check runs the hook (it reports their p50).
CALLS = 5
#: The hook's options that take a value (the rest are flags).
_VALUED = {
    "--scope",
    "--limit",
    "--max-chars",
    "--min-relevance",
    "--max-total",
    "--format",
    "--socket",
    "--model",
    "--n-ctx",
}


@dataclass
class Report:
    """What the check found: ``facts`` (label, text) and ``problems`` (problem, fix)."""

    facts: List[Tuple[str, str]] = field(default_factory=list)
    problems: List[Tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def fact(self, label: str, text: str) -> None:
        self.facts.append((label, text))

    def problem(self, text: str, fix: str) -> None:
        self.problems.append((text, fix))


def settings_files(project: str) -> List[str]:
    root = os.path.abspath(project)
    return [
        os.path.join(root, ".claude", "settings.local.json"),
        os.path.join(root, ".claude", "settings.json"),
        os.path.join(os.path.expanduser("~"), ".claude", "settings.json"),
    ]


def is_sqlite_rrf_hook(h: Any) -> bool:
    """A command hook running ``sqlite-rrf hook``, or an HTTP hook posting to a server's
    :data:`~sqlite_rrf.app.hosts.HOOK_PATH`."""
    from urllib.parse import urlsplit

    url = hook_post_url(h)
    return is_hook_command(h) or (url is not None and urlsplit(url).path.rstrip("/") == HOOK_PATH)


def find_hooks(project: str, report: Report) -> List[Tuple[str, Dict[str, Any]]]:
    """Every sqlite-rrf prompt hook Claude Code runs in ``project``: (file, hook)."""
    found = []
    for path in settings_files(project):
        try:
            data = load_json(path, read_bytes(path))
        except UserError as e:
            report.problem(str(e), f"fix {path} (Claude Code ignores a file it cannot read)")
            continue
        groups = (
            data.get("hooks", {}).get(HOOK_EVENT) if isinstance(data.get("hooks"), dict) else None
        )
        for g in groups if isinstance(groups, list) else []:
            hooks = g.get("hooks") if isinstance(g, dict) else None
            for h in hooks if isinstance(hooks, list) else []:
                if is_sqlite_rrf_hook(h):
                    found.append((path, h))
    return found


def parse_hook_command(command: str) -> Dict[str, Any]:
    """The database and options of a ``sqlite-rrf hook DB …`` command line."""
    argv = shlex.split(command)[2:]
    out: Dict[str, Any] = {"db": None}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--") and "=" in a:
            k, v = a.split("=", 1)
            out[k] = v
        elif a in _VALUED and i + 1 < len(argv):
            out[a] = argv[i + 1]
            i += 1
        elif a.startswith("--"):
            out[a] = True
        elif out["db"] is None:
            out["db"] = a
        i += 1
    return out


def _payload(project: str) -> bytes:
    return json.dumps(
        {
            "session_id": f"sqlite-rrf-setup-check-{os.getpid()}",
            "transcript_path": "",
            "cwd": os.path.abspath(project),
            "hook_event_name": HOOK_EVENT,
            "prompt": TEST_PROMPT,
        }
    ).encode("utf-8")


def _headers(h: Dict[str, Any]) -> Dict[str, str]:
    """The HTTP hook's headers with its allowed variables filled in, as Claude Code does."""
    import re

    allowed = set(h.get("allowedEnvVars") or [])
    out = {"Content-Type": "application/json"}
    for k, v in (h.get("headers") or {}).items():

        def sub(m: Any) -> str:
            name = m.group(1) or m.group(2)
            return os.environ.get(name, "") if name in allowed else ""

        out[str(k)] = re.sub(r"\$\{(\w+)\}|\$(\w+)", sub, str(v))
    return out


def run_hook(h: Dict[str, Any], project: str) -> Tuple[float, int, bytes, str]:
    """One run of the hook as Claude Code runs it: (seconds, status, stdout, stderr). A
    command gets the JSON on stdin, in the project's directory; an HTTP hook gets it POSTed.
    The status of an HTTP hook is its HTTP status (0: no answer)."""
    timeout = float(h.get("timeout") or 600)
    t = time.perf_counter()
    if h.get("type") == "command":
        env = dict(os.environ, CLAUDE_PROJECT_DIR=os.path.abspath(project))
        try:
            p = subprocess.run(
                ["/bin/sh", "-c", h["command"]],
                input=_payload(project),
                capture_output=True,
                cwd=project,
                env=env,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return time.perf_counter() - t, -1, b"", f"no answer in its timeout ({timeout:g} s)"
        return time.perf_counter() - t, p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")
    import urllib.error
    import urllib.request

    req = urllib.request.Request(
        h["url"], data=_payload(project), headers=_headers(h), method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return time.perf_counter() - t, r.status, r.read(), ""
    except urllib.error.HTTPError as e:
        return time.perf_counter() - t, e.code, b"", e.read().decode("utf-8", "replace")
    except (OSError, ValueError) as e:
        return time.perf_counter() - t, 0, b"", str(getattr(e, "reason", e))


def ping_http(url: str, h: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The server's answer to ``GET`` on the hook's URL (its database), or None."""
    import urllib.request

    req = urllib.request.Request(url, headers=_headers(h), method="GET")
    try:
        with urllib.request.urlopen(req, timeout=3) as r:
            answer = json.loads(r.read())
    except (OSError, ValueError):
        return None
    return answer if isinstance(answer, dict) else None


def ping_socket(path: str) -> Optional[Dict[str, Any]]:
    """The warm server's answer to a ping on its hook socket, or None."""
    import socket
    import stat

    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISSOCK(st.st_mode):
        return None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(3)
        s.connect(path)
        s.sendall(b'{"v": 1, "op": "ping"}\n')
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        answer = json.loads(data)
    except (OSError, ValueError):
        return None
    finally:
        s.close()
    return answer if isinstance(answer, dict) else None


def check(project: str) -> Report:
    """Everything ``setup --check`` reports for ``project`` (see the module's text)."""
    report = Report()
    hooks = find_hooks(project, report)
    if not hooks:
        report.problem(
            "no sqlite-rrf prompt hook in " + ", ".join(settings_files(project)),
            "sqlite-rrf setup claude-code (in the project; --user for every project)",
        )
        return report
    if len(hooks) > 1:
        report.problem(
            f"{len(hooks)} sqlite-rrf hooks run on every prompt ("
            + ", ".join(p for p, _ in hooks)
            + "): the memory is added to the context more than once",
            "keep one: sqlite-rrf setup claude-code --undo (or --user --undo)",
        )
    path, h = hooks[0]
    report.fact(
        "hook", f"{path}: {h.get('command') or h.get('url')} (timeout {h.get('timeout')} s)"
    )
    if h.get("timeout") is None:
        report.problem(
            "the hook has no timeout: Claude Code waits up to 600 s for it",
            "sqlite-rrf setup claude-code (it writes the hook with a timeout)",
        )
    if h.get("type") == "http":
        ping = ping_http(h["url"], h)
        if ping is None or not isinstance(ping.get("db"), str):
            report.problem(
                f"no server answers at {h['url']}: every prompt goes without the memory",
                "start it: systemctl --user start sqlite-rrf (after `sqlite-rrf setup "
                "systemd`), or sqlite-rrf serve DB --http PORT",
            )
            return report
        report.fact("server", f"answers at {h['url']} (pid {ping.get('pid')})")
        from urllib.parse import parse_qs, urlsplit

        pinned = parse_qs(urlsplit(h["url"]).query).get("scope")
        opts: Dict[str, Any] = {
            "db": ping["db"],
            "--scope": pinned[-1] if pinned else None,
            "server_model": ping.get("model") or "",
        }
    else:
        opts = parse_hook_command(h["command"])
    db = opts.get("db")
    if not db:
        report.problem("the hook names no database", "sqlite-rrf setup claude-code --db PATH")
        return report
    db = os.path.expanduser(db)
    _check_mcp(db, project, report)
    store = _check_database(db, opts, report)
    if store is None:
        _run(h, project, report)
        return report
    try:
        if h.get("type") == "command":
            from .opening import socket_path

            sock = opts.get("--socket") or socket_path(db)
            ping = None if opts.get("--no-server") else ping_socket(sock)
            report.fact(
                "server",
                f"answers at {sock} (pid {ping.get('pid')})"
                if ping
                else "none (each prompt starts the hook's own process; `sqlite-rrf setup "
                "systemd` and `setup claude-code --server` keep one warm)",
            )
        _check_scope(store, opts.get("--scope"), project, report)
    finally:
        from .opening import close_store

        close_store(store)
    _run(h, project, report)
    return report


def _check_mcp(db: str, project: str, report: Report) -> None:
    """The project's ``.mcp.json``: a sqlite-rrf stdio server of another database than the
    hook's remembers where the hook never recalls."""
    path = os.path.join(os.path.abspath(project), ".mcp.json")
    try:
        servers = load_json(path, read_bytes(path)).get("mcpServers")
    except UserError:
        return  # Claude Code's problem to say; the hook does not read it
    for name, entry in (servers or {}).items() if isinstance(servers, dict) else []:
        args = entry.get("args") if isinstance(entry, dict) else None
        cmd = entry.get("command") if isinstance(entry, dict) else None
        if not (isinstance(cmd, str) and os.path.basename(cmd) == "sqlite-rrf"):
            continue
        if not (isinstance(args, list) and len(args) >= 2 and args[0] == "mcp"):
            continue
        theirs = os.path.expanduser(str(args[1]))
        if os.path.realpath(theirs) == os.path.realpath(db):
            report.fact("mcp", f"{path}: {name!r} serves the hook's database")
        else:
            report.problem(
                f"{path}: the MCP server {name!r} serves {theirs}, the hook recalls from "
                f"{db}: what the agent remembers, the hook never recalls",
                "point both at one database: sqlite-rrf setup claude-code --db PATH",
            )


def _check_database(db: str, opts: Dict[str, Any], report: Report) -> Any:
    """The database and the model: the store, open with the hook's model, or None."""
    from .opening import open_store

    if not os.path.exists(db):
        report.problem(
            f"{db}: no such database (the hook says so on every prompt and recalls nothing)",
            f"sqlite-rrf init {shlex.quote(db)} (or run setup again: it makes it)",
        )
        return None
    from ..doctor import check_path

    try:
        doc = check_path(db)
    except Exception as e:
        from .errors import error_message, fault_message

        report.problem(f"{db}: {error_message(e) or fault_message(e)}", "check the --db path")
        return None
    for f in doc.findings:
        report.problem(
            f"{db}: {f.part}: {f.message}", f"sqlite-rrf check {shlex.quote(db)} --repair"
        )
    model = opts.get("--model")
    if "server_model" in opts:  # an HTTP hook: the server's model is the one that counts
        return _served(db, opts["server_model"], doc.ok, report)
    try:
        store = open_store(db, "recall", model=model)
    except UserError as e:
        report.problem(
            f"the model the hook uses ({model or 'the default'}) cannot be used with {db}: {e}",
            "pin one that can: sqlite-rrf setup claude-code --model PATH (the model the "
            "database was made with)",
        )
        from .opening import open_store as plain

        try:
            return plain(db)
        except UserError:
            return None
    from .manage import stats

    st = stats(store)
    report.fact(
        "database",
        f"{db}: schema version {st.get('schema_version')}, {st.get('episodes')} episodes, "
        f"{st.get('with_embedding')} with embeddings"
        + ("; doctor finds nothing wrong" if doc.ok else ""),
    )
    emb = getattr(store, "embedder", None)
    if emb is not None:
        report.fact(
            "model",
            f"{getattr(emb, 'model_name', model)} loads and matches the database's "
            f"({store.dim} dimensions, the same fingerprint)",
        )
    elif st.get("with_embedding"):
        report.problem(
            "the hook runs without a model: the vector list is off for a database with embeddings",
            "pin the model: sqlite-rrf setup claude-code --model PATH",
        )
    else:
        report.fact("model", "none (the database has no embeddings yet)")
    return store


def _served(db: str, model: str, doctor_ok: bool, report: Report) -> Any:
    """The database of an HTTP hook's server (opened here without a model), and the
    server's model: ``serve`` refuses a named model that does not match the database's."""
    from .manage import stats
    from .opening import open_store

    store = open_store(db)
    st = stats(store)
    report.fact(
        "database",
        f"{db}: schema version {st.get('schema_version')}, {st.get('episodes')} episodes, "
        f"{st.get('with_embedding')} with embeddings"
        + ("; doctor finds nothing wrong" if doctor_ok else ""),
    )
    if model:
        report.fact("model", f"{model}, loaded by the server (it matched the database's)")
    elif st.get("with_embedding"):
        report.problem(
            "the server runs without a model: the vector list is off for a database with "
            "embeddings",
            "restart it with the model: sqlite-rrf setup systemd --model PATH, then "
            "systemctl --user restart sqlite-rrf",
        )
    return store


def _check_scope(store: Any, pinned: Optional[str], project: str, report: Report) -> None:
    from .manage import stats
    from .scopes import ALL_SCOPES, derive_scope, recall_scopes, scope_name

    by_scope: Dict[str, int] = stats(store).get("by_scope", {})
    total = sum(by_scope.values())
    scopes = recall_scopes(pinned, None if pinned is not None else derive_scope(project), "--scope")
    if scopes is None or pinned == ALL_SCOPES:
        report.fact("scope", f"every scope ({total} episodes)")
        return
    names = [scope_name(s) for s in scopes]
    held = sum(by_scope.get(n, 0) for n in names)
    words = " and ".join(f"`{n}`" for n in names)
    report.fact("scope", f"from {os.path.abspath(project)}: {words} ({held} episodes)")
    if total and not held:
        others = ", ".join(
            f"`{n}` ({c})" for n, c in sorted(by_scope.items(), key=lambda x: -x[1])[:5]
        )
        report.problem(
            f"the hook recalls {words} from here, and the database holds nothing there; "
            f"its scopes: {others}",
            "run the agent from the project whose scope holds the memories, or pin the "
            "scope: sqlite-rrf setup claude-code --scope NAME",
        )


def _run(h: Dict[str, Any], project: str, report: Report) -> None:
    times = []
    said: List[str] = []
    for _ in range(CALLS):
        dt, status, out, err = run_hook(h, project)
        times.append(dt)
        bad = status != 0 if h.get("type") == "command" else not 200 <= status < 300
        lines = [ln for ln in err.splitlines() if ln.strip()]
        if bad or lines:
            for ln in lines or [f"status {status}"]:
                if ln not in said:
                    said.append(ln)
            if bad:
                break
        if out.strip():
            try:
                context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
                if not isinstance(context, str):
                    raise TypeError
            except (ValueError, KeyError, TypeError):
                said.append("its output is not Claude Code's hookSpecificOutput JSON")
    for ln in said:
        report.problem(f"the hook said: {ln}", "fix what it says (see the lines above)")
    p50 = statistics.median(times) * 1000
    report.fact("calls", f"{len(times)} with a test prompt: p50 {p50:.0f} ms")
    limit = float(h.get("timeout") or 600) * 1000
    if p50 > limit:
        report.problem(
            f"the hook's p50 ({p50:.0f} ms) is over its timeout ({limit:.0f} ms)",
            "keep a server warm: sqlite-rrf setup systemd, then setup claude-code --server",
        )
