"""Faults and bad arguments in the command line's words (M2, M13): a tool error's text
names the argument or the file and the fault, no library's class name, text or URL."""

import json
import re
from typing import Any, Dict

from mcp.server.mcpserver.exceptions import ToolError

from ..app import UserError, error_message, stored_scope, without_class_names
from ..core.validate import MAX_ID_CHARS, check_size
from ..store import StoreError
from . import MAX_CONTENT_CHARS

#: The store's word for a memory, which the tools' texts do not use (M12).
EPISODE_WORD = re.compile(r"\bepisode(s?)\b")


def plain(text: str) -> str:
    """The store's words in the tools' (M12): a memory, not an episode; no library's
    class name (M13)."""
    return EPISODE_WORD.sub(
        lambda m: "memories" if m.group(1) else "memory", without_class_names(text)
    )


def is_fault(e: BaseException) -> bool:
    """Whether ``e`` is a fault of ours (logged with its traceback), not a user's error
    nor one of a database, extension or model the server cannot use."""
    return error_message(e) is None and not isinstance(e, (StoreError, ValueError))


def words(e: BaseException, store: Any) -> str:
    """The one line for ``e`` (M2): the command line's message, no library's class
    name, text or URL (M13); a fault of ours says where its traceback is."""
    if isinstance(e, (UserError, StoreError, ValueError)):
        return plain(str(e))
    known = error_message(e)
    if known is not None:
        return plain(f"{store.path}: {known}")
    return (
        f"an unexpected fault in the server ({plain(str(e)) or 'no message'}); "
        "its traceback is on the server's stderr: please report it"
    )


def bounded(content: str) -> str:
    """M11: a text no longer than MAX_CONTENT_CHARS."""
    if isinstance(content, str) and len(content) > MAX_CONTENT_CHARS:
        raise ToolError(
            f"content: {len(content)} characters, more than the "
            f"{MAX_CONTENT_CHARS} a memory may hold; split it into "
            "self-contained memories (only the first tokens of each are "
            "embedded); nothing was written"
        )
    return content


def bounded_id(id: Any) -> Any:
    """An id a call names, refused when longer than the store's maximum (so that no
    answer echoes it)."""
    try:
        check_size(id, "id", MAX_ID_CHARS)
    except StoreError as e:
        raise ToolError(f"{e}; no memory has such an id") from None
    return id


def one_scope(scope: str) -> str:
    """A scope a call names, as stored (a tool error for one that cannot be)."""
    try:
        return stored_scope(scope)
    except UserError as e:
        raise ToolError(str(e)) from None


def check_arguments(tool: Any, arguments: Dict[str, Any]) -> None:
    """M13: an argument the tool does not take is refused, naming those it takes."""
    known = tool.parameters.get("properties", {})
    unknown = [a for a in arguments if a not in known]
    if unknown:
        raise ToolError(
            f"{', '.join(unknown)}: {tool.name} has no such argument; it "
            f"takes {', '.join(known) or 'none'}"
        )


def expected(prop: Dict[str, Any]) -> str:
    """What a property of a tool's input schema takes, in words."""
    names = {
        "integer": "an integer",
        "number": "a number",
        "string": "text",
        "boolean": "true or false",
        "object": "a JSON object",
        "array": "a list",
        "null": "nothing",
    }
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"] if v is not None)
    kinds = [p.get("type") for p in prop.get("anyOf", [prop])]
    return " or ".join(names.get(k, str(k)) for k in kinds if k != "null")


def argument_errors(tool: Any, e: Any) -> str:
    """M13: the SDK's validation error in words, naming each argument and what it
    takes: no library text, URL or class name."""
    props = tool.parameters.get("properties", {})
    lines = []
    for err in e.errors(include_url=False):
        name = str(err["loc"][0]) if err["loc"] else ""
        if err["type"] == "missing":
            lines.append(
                f"{name}: missing; {tool.name} needs it "
                f"({props.get(name, {}).get('description', '')})"
            )
        else:
            got = json.dumps(err.get("input"), ensure_ascii=False, default=str)
            got = got if len(got) <= 60 else got[:60] + "…"
            lines.append(f"{name}: expected {expected(props.get(name, {}))}, got {got}")
    return "; ".join(dict.fromkeys(lines))
