"""``sqlite-rrf setup codex``: the MCP server in Codex's ``config.toml`` (``~/.codex/`` with
``--user``, else the project's ``.codex/``, which Codex reads in a trusted project), as an
``[mcp_servers.NAME]`` table: ``command`` and ``args`` (stdio), or ``url`` and
``bearer_token_env_var`` (the warm server).

TOML is edited as text, so that every other byte of the file stays as it is: the table is
appended (a new one) or its text replaced (setup's own, as setup wrote it); the result is
parsed again before anything is written. A table of the same name that is not setup's, or
that was edited since, is left alone and the table to write is said instead.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, Optional

import tomllib

from .errors import UserError
from .setup_files import Change, read_bytes, read_record, restorable

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def config_path(project: str, user: bool) -> str:
    if user:
        home = os.environ.get("CODEX_HOME") or os.path.join(os.path.expanduser("~"), ".codex")
        return os.path.join(home, "config.toml")
    return os.path.join(os.path.abspath(project), ".codex", "config.toml")


def _string(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(value, ensure_ascii=False)


def table_text(name: str, entry: Dict[str, Any]) -> str:
    """The ``[mcp_servers.NAME]`` table for ``entry`` (string and list-of-string values)."""
    key = name if _BARE_KEY.fullmatch(name) else _string(name)
    lines = [f"[mcp_servers.{key}]"]
    for k, v in entry.items():
        if isinstance(v, list):
            lines.append(f"{k} = [{', '.join(_string(x) for x in v)}]")
        else:
            lines.append(f"{k} = {_string(v)}")
    return "\n".join(lines) + "\n"


def _parse(path: str, text: str) -> Dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(
            f"{path}: not valid TOML ({e}); fix it, then run setup again (nothing was written)"
        ) from None


def toml_change(
    path: str, name: str, entry: Dict[str, Any], is_ours: Any, undo: bool, force: bool
) -> Change:
    """The change to Codex's ``config.toml`` at ``path`` that adds (or, ``undo``, removes)
    the server ``name``."""
    what = f"the MCP server {name!r}"
    before = read_bytes(path)
    if undo:
        ok, orig = restorable(path, before)
        if ok:
            return Change(path, before, orig, what)
    try:
        text = "" if before is None else before.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text; fix or move it, then run setup again") from None
    servers = _parse(path, text).get("mcp_servers")
    current = servers.get(name) if isinstance(servers, dict) else None
    block = table_text(name, entry)
    if undo:
        if current is None or not is_ours(current):
            return Change(path, before, before, what)
        after = _without(text, path, name, entry, is_ours)
        rec = read_record(path)
        if not after.strip() and rec is not None and rec.get("before") is None:
            return Change(path, before, None, what)
        return Change(path, before, after.encode("utf-8"), what)
    if current == entry:
        return Change(path, before, before, what)
    if current is not None:
        if not is_ours(current):
            raise UserError(
                f"{path}: it already has an MCP server named {name!r} that is not "
                "sqlite-rrf's; pass --name OTHER"
            )
        old = _own_block(text, path, name, current)
        after = text.replace(old, block, 1)
    else:
        sep = "" if not text or text.endswith("\n\n") else "\n" if text.endswith("\n") else "\n\n"
        after = text + sep + block
    try:
        check = tomllib.loads(after).get("mcp_servers", {}).get(name)
    except tomllib.TOMLDecodeError:
        check = None
    if check != entry:
        raise UserError(
            f"{path}: setup cannot add its table to this file's mcp_servers as written; add "
            f"this yourself:\n{block}"
        )
    return Change(path, before, after.encode("utf-8"), what)


def _own_block(text: str, path: str, name: str, current: Dict[str, Any]) -> str:
    """The text of the table setup wrote for ``current``, as it is in ``text``."""
    old = table_text(name, current)
    if old not in text:
        raise UserError(
            f"{path}: the table [mcp_servers.{name}] was edited since setup wrote it; "
            "change or remove it yourself"
        )
    return old


def _without(text: str, path: str, name: str, entry: Dict[str, Any], is_ours: Any) -> str:
    current = _parse(path, text)["mcp_servers"][name]
    old = _own_block(text, path, name, current)
    i = text.index(old)
    start = i - 1 if i >= 2 and text[i - 2 : i] == "\n\n" else i  # the blank line setup added
    return text[:start] + text[i + len(old) :]


def codex_entry(
    exe: str, argv: Any, url: Optional[str], token_env: Optional[str]
) -> Dict[str, Any]:
    """Codex's table: ``command`` and ``args``, or the server's ``url`` (and the variable
    holding its bearer token)."""
    if url is None:
        return {"command": exe, "args": list(argv)}
    entry: Dict[str, Any] = {"url": url}
    if token_env:
        entry["bearer_token_env_var"] = token_env
    return entry
