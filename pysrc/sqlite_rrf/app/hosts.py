"""``sqlite-rrf setup HOST``: the memory wired into an agent's host, by editing the host's
own configuration files (what to write, where, and how to take it back out).

- **claude-code**: the ``UserPromptSubmit`` hook in ``.claude/settings.json`` (``--user``:
  ``~/.claude/settings.json``) and the MCP server in ``.mcp.json`` (``--user``: the
  ``claude mcp add --scope user`` command, run when ``claude`` is on PATH, else printed).
  With ``server`` the hook is an HTTP hook (``"type": "http"``, posted to the warm
  server's :data:`HOOK_PATH`) and the MCP server its ``/mcp`` endpoint.
- **cursor**: the MCP server in ``.cursor/mcp.json`` (``--user``: ``~/.cursor/mcp.json``).
- **gemini**: the MCP server in ``.gemini/settings.json`` (``--user``:
  ``~/.gemini/settings.json``).
- **codex**: the MCP server in ``.codex/config.toml`` (``--user``: ``~/.codex/config.toml``,
  or ``$CODEX_HOME/config.toml``), an ``[mcp_servers.NAME]`` table (:mod:`.codex`).
- **systemd**: the user unit that keeps ``sqlite-rrf serve DB --http PORT`` running
  (``~/.config/systemd/user/`` + :data:`UNIT_NAME`).

Rules: a file is merged, never replaced: every other key, hook and server stays. A run
that would change nothing writes nothing. A file is written atomically (a temporary file
beside it, then renamed over it, with the file's own mode). What a setup wrote is
remembered under ``$XDG_STATE_HOME/sqlite-rrf/setup/`` (the file's bytes before), so the
undo puts the very bytes back when nothing else changed the file since; when something
did, the undo removes only the entries setup adds and leaves the rest. An entry of the same
name that is not sqlite-rrf's is never overwritten (``force``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .errors import UserError
from .setup_files import (
    Change,
    dump_json,
    json_container,
    load_json,
    read_bytes,
    read_record,
    restorable,
)

#: The hosts ``setup`` knows.
HOSTS = ("claude-code", "cursor", "gemini", "codex", "systemd")
#: The MCP server's name in a host's configuration (``--name``'s default).
MCP_NAME = "memory"
#: The command hook's ``timeout`` (seconds) that setup writes: a cold hook with a model
#: takes about a second; Claude Code's own default is 600 s.
HOOK_TIMEOUT = 10
#: The HTTP hook's ``timeout`` (seconds): the warm server answers in milliseconds.
HTTP_HOOK_TIMEOUT = 5
#: The warm server's port when ``--url`` is not given (``sqlite-rrf serve DB --http PORT``).
DEFAULT_PORT = 8765
#: The path at which ``sqlite-rrf serve --http`` answers the HTTP prompt hook.
HOOK_PATH = "/hook"
#: The bearer token's variable, named in the HTTP hook's headers (``allowedEnvVars``).
TOKEN_ENV = "SQLITE_RRF_TOKEN"
#: The systemd user unit's file name.
UNIT_NAME = "sqlite-rrf.service"
#: The hook event setup writes the hook under.
HOOK_EVENT = "UserPromptSubmit"


def data_home() -> str:
    return os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local/share")


def default_db() -> str:
    """``--db``'s default: ``$XDG_DATA_HOME/sqlite-rrf/memory.db`` (XDG_DATA_HOME defaults
    to ``~/.local/share``), one memory for every project (each in its own scope)."""
    return os.path.join(data_home(), "sqlite-rrf", "memory.db")


def executable() -> str:
    """The ``sqlite-rrf`` of this installation, as an absolute path (a host's PATH need not
    hold the virtualenv)."""
    beside = os.path.join(os.path.dirname(sys.executable), "sqlite-rrf")
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which("sqlite-rrf") or "sqlite-rrf"


@dataclass
class Options:
    """What ``setup`` was asked for."""

    host: str
    project: str
    user: bool = False
    db: str = ""
    model: Optional[str] = None
    scope: Optional[str] = None
    server: bool = False
    url: str = f"http://127.0.0.1:{DEFAULT_PORT}"
    token_env: Optional[str] = None
    name: str = MCP_NAME
    force: bool = False
    exe: str = field(default_factory=executable)


@dataclass
class Plan:
    """What a setup (or its undo) does: the files it changes, the commands it runs (or
    prints, when the tool is not installed), and notes for the user."""

    changes: List[Change] = field(default_factory=list)
    commands: List[List[str]] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)


# -- what is written --


def hook_argv(o: Options) -> List[str]:
    """The command hook's command line: the model and the database pinned."""
    argv = [o.exe, "hook", o.db, "--format", "json"]
    if o.model:
        argv += ["--model", o.model]
    if o.scope is not None:
        argv += ["--scope", o.scope]
    return argv


def mcp_argv(o: Options) -> List[str]:
    """The MCP server's arguments (after the command, ``sqlite-rrf``)."""
    argv = ["mcp", o.db]
    if o.model:
        argv += ["--model", o.model]
    if o.scope is not None:
        argv += ["--scope", o.scope]
    return argv


def hook_url(o: Options) -> str:
    return o.url.rstrip("/") + HOOK_PATH


def mcp_url(o: Options) -> str:
    """The server's MCP endpoint for ``o``: ``/s/SCOPE/mcp`` for the project's scope (the
    scope the hook derives from the project's directory, or ``--scope``), so an agent
    remembers where its hook recalls; ``/mcp`` (the server's default) for ``--user``
    without ``--scope``."""
    from urllib.parse import quote

    from .scopes import SHARED_SCOPE, derive_scope

    scope = o.scope if o.scope is not None else None if o.user else derive_scope(o.project)
    base = o.url.rstrip("/")
    if scope is None or scope in ("", SHARED_SCOPE):
        return base + "/mcp"
    return f"{base}/s/{quote(scope, safe='')}/mcp"


def _needs_token(o: Options) -> bool:
    from urllib.parse import urlsplit

    host = urlsplit(o.url).hostname or ""
    return o.token_env is not None or host not in ("127.0.0.1", "localhost", "::1")


def hook_entry(o: Options) -> Dict[str, Any]:
    """The hook Claude Code runs: a command, or an HTTP POST to the warm server."""
    if not o.server:
        return {"type": "command", "command": shlex.join(hook_argv(o)), "timeout": HOOK_TIMEOUT}
    entry: Dict[str, Any] = {"type": "http", "url": hook_url(o), "timeout": HTTP_HOOK_TIMEOUT}
    if _needs_token(o):
        var = o.token_env or TOKEN_ENV
        entry["headers"] = {"Authorization": f"Bearer ${var}"}
        entry["allowedEnvVars"] = [var]
    return entry


def mcp_entry(o: Options) -> Dict[str, Any]:
    """The host's MCP server entry: stdio (the host starts ``sqlite-rrf mcp``), or the warm
    server's ``/mcp`` over streamable HTTP (``server``)."""
    if not o.server:
        return {"command": o.exe, "args": mcp_argv(o)}
    key = {"claude-code": "url", "cursor": "url", "gemini": "httpUrl"}[o.host]
    entry: Dict[str, Any] = {key: mcp_url(o)}
    if o.host == "claude-code":
        entry = {"type": "http", **entry}
    if _needs_token(o):  # each host's own way to name a variable (Cursor: ${env:NAME})
        var = o.token_env or TOKEN_ENV
        ref = f"${{env:{var}}}" if o.host == "cursor" else f"${{{var}}}"
        entry["headers"] = {"Authorization": f"Bearer {ref}"}
    return entry


def unit_text(o: Options) -> str:
    """The systemd user unit that keeps the warm server running."""
    from urllib.parse import urlsplit

    parts = urlsplit(o.url)
    port = parts.port or DEFAULT_PORT
    host = parts.hostname or "127.0.0.1"
    serve = [o.exe, "serve", o.db, "--http", f"{host}:{port}"]
    if o.model:
        serve += ["--model", o.model]
    if o.scope is not None:
        serve += ["--scope", o.scope]
    lines = [
        "# written by `sqlite-rrf setup systemd`; `sqlite-rrf setup systemd --undo` removes it",
        "[Unit]",
        "Description=sqlite-rrf memory server (the prompt hook and MCP over HTTP)",
        "",
        "[Service]",
        "ExecStart=" + " ".join(_systemd_quote(a) for a in serve),
    ]
    if _needs_token(o):
        lines.append(f"PassEnvironment={o.token_env or TOKEN_ENV}")
    lines += ["Restart=on-failure", "", "[Install]", "WantedBy=default.target", ""]
    return "\n".join(lines)


def _systemd_quote(arg: str) -> str:
    if arg and all(c.isalnum() or c in "/._-:+=@,%" for c in arg):
        return arg.replace("%", "%%")
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%") + '"'


def unit_path() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "systemd", "user", UNIT_NAME)


# -- which entries are ours --


def is_hook_command(h: Any) -> bool:
    """A command hook (Claude Code's settings entry) that runs ``sqlite-rrf hook``."""
    if not (isinstance(h, dict) and h.get("type") == "command"):
        return False
    if not isinstance(h.get("command"), str):
        return False
    try:
        argv = shlex.split(h["command"])
    except ValueError:
        return False
    return len(argv) >= 2 and os.path.basename(argv[0]) == "sqlite-rrf" and argv[1] == "hook"


def hook_post_url(h: Any) -> Optional[str]:
    """The URL of an HTTP hook entry, or None for any other entry."""
    if isinstance(h, dict) and h.get("type") == "http" and isinstance(h.get("url"), str):
        return str(h["url"])
    return None


def is_our_hook(h: Any, o: Options) -> bool:
    """A hook setup wrote: a command running ``sqlite-rrf hook``, or an HTTP hook posting
    to the server's :data:`HOOK_PATH` at ``o.url``."""
    url = hook_post_url(h)
    return is_hook_command(h) or (url is not None and url.rstrip("/") == hook_url(o))


def is_our_server(entry: Any) -> bool:
    """An MCP server entry setup wrote: ``sqlite-rrf mcp …``, or a URL ending in ``/mcp``
    that setup's form has (``url``/``httpUrl`` and nothing a user would add but headers)."""
    if not isinstance(entry, dict):
        return False
    cmd, args = entry.get("command"), entry.get("args")
    if isinstance(cmd, str) and isinstance(args, list):
        return os.path.basename(cmd) == "sqlite-rrf" and args[:1] == ["mcp"]
    url = entry.get("url") or entry.get("httpUrl")
    known = {"type", "url", "httpUrl", "headers", "bearer_token_env_var"}
    return isinstance(url, str) and url.endswith("/mcp") and set(entry) <= known


# -- the plans --


def _home(*parts: str) -> str:
    return os.path.join(os.path.expanduser("~"), *parts)


def config_paths(o: Options) -> Dict[str, str]:
    """The files setup edits for ``o``: ``hooks`` (Claude Code's settings) and ``mcp``
    (the MCP servers' file), as the host has them."""
    root = os.path.abspath(o.project)
    if o.host == "claude-code":
        paths = {
            "hooks": _home(".claude", "settings.json")
            if o.user
            else os.path.join(root, ".claude", "settings.json")
        }
        if not o.user:
            paths["mcp"] = os.path.join(root, ".mcp.json")
        return paths
    if o.host == "cursor":
        return {
            "mcp": _home(".cursor", "mcp.json")
            if o.user
            else os.path.join(root, ".cursor", "mcp.json")
        }
    if o.host == "codex":
        from .codex import config_path

        return {"mcp": config_path(o.project, o.user)}
    if o.host == "gemini":
        return {
            "mcp": _home(".gemini", "settings.json")
            if o.user
            else os.path.join(root, ".gemini", "settings.json")
        }
    return {"unit": unit_path()}


def _json_change(path: str, what: str, edit: Any, undo: bool) -> Change:
    before = read_bytes(path)
    if undo:
        ok, orig = restorable(path, before)
        if ok:
            return Change(path, before, orig, what)
    data = load_json(path, before)
    if not edit(data):
        return Change(path, before, before, what)
    rec = read_record(path)
    if undo and not data and rec is not None and rec.get("before") is None:
        return Change(path, before, None, what)  # setup made the file; nothing else is in it
    return Change(path, before, dump_json(data), what)


def _edit_hook(o: Options, undo: bool, path: str) -> Any:
    def edit(data: Dict[str, Any]) -> bool:
        if undo and not isinstance(data.get("hooks"), dict):
            return False
        hooks = json_container(data, "hooks", path, {})
        if undo and not isinstance(hooks.get(HOOK_EVENT), list):
            return False
        groups = json_container(hooks, HOOK_EVENT, path, [])
        found = [
            (g, i)
            for g in groups
            if isinstance(g, dict) and isinstance(g.get("hooks"), list)
            for i, h in enumerate(g["hooks"])
            if is_our_hook(h, o)
        ]
        want = hook_entry(o)
        if not undo and len(found) == 1 and found[0][0]["hooks"][found[0][1]] == want:
            return False
        if undo and not found:
            return False
        keep = None if undo else found[0] if found else None
        for g, i in reversed(found):
            if keep is not None and g is keep[0] and i == keep[1]:
                g["hooks"][i] = want
            else:
                del g["hooks"][i]
        groups[:] = [
            g
            for g in groups
            if not (isinstance(g, dict) and g.get("hooks") == [] and set(g) <= {"hooks", "matcher"})
        ]
        if not undo and keep is None:
            groups.append({"hooks": [want]})
        if undo:
            if not groups:
                del hooks[HOOK_EVENT]
            if not hooks:
                del data["hooks"]
        return True

    return edit


def _edit_server(o: Options, undo: bool, path: str) -> Any:
    def edit(data: Dict[str, Any]) -> bool:
        if undo and not isinstance(data.get("mcpServers"), dict):
            return False
        servers = json_container(data, "mcpServers", path, {})
        cur = servers.get(o.name)
        if undo:
            if cur is None or not is_our_server(cur):
                return False
            del servers[o.name]
            if not servers:
                del data["mcpServers"]
            return True
        want = mcp_entry(o)
        if cur == want:
            return False
        if cur is not None and not is_our_server(cur) and not o.force:
            raise UserError(
                f"{path}: it already has an MCP server named {o.name!r} that is not "
                "sqlite-rrf's; pass --name OTHER (or --force to replace it)"
            )
        servers[o.name] = want
        return True

    return edit


def claude_mcp_command(o: Options, undo: bool) -> List[str]:
    """``claude mcp add --scope user …`` (or ``remove``): the user's MCP servers live in
    ``~/.claude.json``, which Claude Code manages itself."""
    if undo:
        return ["claude", "mcp", "remove", "--scope", "user", o.name]
    if o.server:
        cmd = ["claude", "mcp", "add", "--transport", "http", "--scope", "user"]
        if _needs_token(o):
            cmd += ["--header", f"Authorization: Bearer ${{{o.token_env or TOKEN_ENV}}}"]
        return [*cmd, o.name, mcp_url(o)]
    return ["claude", "mcp", "add", "--scope", "user", o.name, "--", o.exe, *mcp_argv(o)]


def plan(o: Options, undo: bool = False) -> Plan:
    """What ``setup`` (``undo``: ``setup --undo``) changes for ``o``; nothing is written."""
    p = Plan()
    paths = config_paths(o)
    if o.host == "systemd":
        p.changes.append(_unit_change(o, undo, paths["unit"]))
        if not undo:
            p.notes.append(
                "start it now and at every login: systemctl --user daemon-reload && "
                f"systemctl --user enable --now {UNIT_NAME}"
            )
        else:
            p.notes.append(f"if it runs: systemctl --user disable --now {UNIT_NAME}")
        return p
    if "hooks" in paths:
        path = paths["hooks"]
        p.changes.append(
            _json_change(path, f"the {HOOK_EVENT} hook", _edit_hook(o, undo, path), undo)
        )
    if o.host == "codex":
        from .codex import codex_entry, toml_change

        token = (o.token_env or TOKEN_ENV) if o.server and _needs_token(o) else None
        entry = codex_entry(o.exe, mcp_argv(o), mcp_url(o) if o.server else None, token)
        p.changes.append(toml_change(paths["mcp"], o.name, entry, is_our_server, undo, o.force))
        return p
    if "mcp" in paths:
        path = paths["mcp"]
        p.changes.append(
            _json_change(path, f"the MCP server {o.name!r}", _edit_server(o, undo, path), undo)
        )
    elif o.host == "claude-code":
        p.commands.append(claude_mcp_command(o, undo))
    return p


def _unit_change(o: Options, undo: bool, path: str) -> Change:
    before = read_bytes(path)
    what = "the systemd user unit"
    if undo:
        ok, orig = restorable(path, before)
        if ok:
            return Change(path, before, orig, what)
        if before is not None:
            raise UserError(
                f"{path}: changed since setup wrote it (or not written by setup); left "
                "alone: remove it yourself if it is no longer wanted"
            )
        return Change(path, before, before, what)
    text = unit_text(o).encode("utf-8")
    if before is not None and before != text and not o.force:
        ours = read_record(path) is not None and restorable(path, before)[0]
        if not ours:
            raise UserError(
                f"{path} exists and is not what setup wrote; pass --force to replace it"
            )
    return Change(path, before, text, what)


def resolve_pinned_model(model: Optional[str], no_model: bool) -> Optional[str]:
    """The model to pin into the command lines: ``model``, else ``$SQLITE_RRF_MODEL``, else
    the default model when it is in the Hugging Face cache (its local file); none only with
    ``no_model``. A path becomes absolute (a host runs the hook from anywhere)."""
    from ..embedding.models import (
        DEFAULT_MODEL,
        MODEL_ENV,
        ModelNotFoundError,
        parse_spec,
        resolve_model,
    )

    if no_model:
        if model:
            raise UserError("--no-model: not with --model")
        return None
    spec = model or os.environ.get(MODEL_ENV, "").strip() or None
    where = "--model" if model else f"${MODEL_ENV}"
    if spec is None:
        try:
            return resolve_model(DEFAULT_MODEL, download=False)
        except (ModelNotFoundError, ValueError):
            raise UserError(
                "no embedding model to pin (without one the hook recalls without the vector "
                f"list): pass --model PATH (a GGUF file), set ${MODEL_ENV}, or fetch the "
                "default with `sqlite-rrf model`; --no-model sets up without it"
            ) from None
    try:
        parsed = parse_spec(spec)
    except ValueError as e:
        raise UserError(f"{where}: {e}") from None
    if parsed.is_hub:
        try:
            return resolve_model(spec, download=False)
        except ModelNotFoundError as e:
            raise UserError(f"{where}: {e}") from None
    path = os.path.abspath(os.path.expanduser(spec))
    if not os.path.isfile(path):
        raise UserError(f"{where}: {path} is not a file (a GGUF embedding model)")
    return path
