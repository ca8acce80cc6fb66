"""What a prompt recalls: the prompt hook's request checked (:func:`check_request`) and
answered (:func:`respond`) as the Markdown an agent adds to its context (:func:`render`,
:func:`as_output`). ``sqlite-rrf hook`` answers in its own process and ``sqlite-rrf serve``
answers the hook's socket with these, so their output is the same (the requirements are
the hook's, H4-H8 in :mod:`sqlite_rrf.hook`).

Like the rest of this package it imports only the standard library at module level (the
hook's client path imports it); the recall's defaults load when :func:`respond` runs.
"""

from __future__ import annotations

import json
import time

from .display import UNKNOWN_AGE, code, escape, flatten, human_age
from .errors import UserError

TYPE_CHECKING = False  # typing is not imported at run time (the hook's H6)
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

    from ..core.options import RecallOptions
    from ..store import Store

#: The hook's ``--format`` choices (H8).
FORMATS = ("markdown", "json")
#: ``--max-chars``'s default: each recalled episode's text is cut at this many characters.
DEFAULT_MAX_CHARS = 400
#: ``--max-total``'s default: the whole output is at most this many characters (H8).
DEFAULT_MAX_TOTAL = 6000


class HookFault(UserError):
    """A fault of the hook's input, said as one line on stderr."""


def scope_words(scope: Any) -> str:
    """What a recall of the store's ``scope=`` covered, in words: ``every scope`` (None),
    ``the shared scope``, ``scope `shop```, ``scope `shop` and the shared scope``,
    ``scopes `a` and `b```."""
    if scope is None:
        return "every scope"
    names = [scope] if isinstance(scope, str) else list(scope)
    named = [code(s) for s in names if s]
    if not named:
        return "the shared scope"
    said = ("scope " if len(named) == 1 else "scopes ") + " and ".join(named)
    return said + (" and the shared scope" if "" in names else "")


def _field_caps() -> "tuple[int, int]":
    """What the hook shows of an id and of a scope name at most (characters): their
    documented maximums (:data:`sqlite_rrf.core.validate.MAX_ID_CHARS`, ``MAX_SCOPE_CHARS``). A
    longer value (written by another client) is cut with "…", so no field can push the
    relevant memories out of the output's bound (H8)."""
    from ..core.validate import MAX_ID_CHARS, MAX_SCOPE_CHARS

    return MAX_ID_CHARS, MAX_SCOPE_CHARS


def _cut(text: str, cap: int) -> str:
    return text if len(text) <= cap else text[:cap].rstrip() + "…"


def render(
    hits: List[Any], scope: Any, max_chars: int, now_ms: Optional[int] = None, max_total: int = 0
) -> str:
    """The recollection as Markdown (H4): a header and one bullet per hit, at most
    ``max_total`` characters in all (H8; 0: no cap), every field counted. ``scope`` is the
    recall's (None, a scope, or a list of scopes: :func:`scope_words`).

    Each field is bounded: the text at ``max_chars``, an id at the field's maximum
    (:func:`_field_caps`), and a scope name in the header too. A bullet that does not fit
    in what is left has its text cut to fit (when at least 40 characters of it fit), else
    it is left out and the next ones are tried, so one long hit never hides the others;
    a last line says how many were left out."""
    if not hits:
        return ""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    id_cap, scope_cap = _field_caps()
    if max_total:  # the header's scope names take at most an eighth of the bound each
        scope_cap = min(scope_cap, max(16, max_total // 8))
    if isinstance(scope, str):
        scope = _cut(scope, scope_cap)
    elif scope is not None:
        scope = [_cut(str(s), scope_cap) for s in scope]
    lines = [f"Recalled from memory (sqlite-rrf, {scope_words(scope)}); may be outdated:"]
    total = len(lines[0]) + 1
    left_out = 0
    for i, h in enumerate(hits):  # H4a: nothing from the memory leaves its line or reads as a tag
        text = flatten(str(h.content))
        if max_chars and len(text) > max_chars:
            text = text[:max_chars].rstrip() + " …"
        mark = ", important" if h.importance == "high" else ""
        dups = getattr(h, "duplicates", 0)
        if dups:  # the near-duplicates collapsed into this one
            mark += f", stands for {dups} near-duplicate{'s' if dups != 1 else ''}"
        age = human_age(h.created_at, now_ms) or UNKNOWN_AGE
        tail = f" _(id {code(_cut(str(h.id), id_cap))}, {age}{mark})_"
        body = escape(text)
        line = f"- {body}{tail}"
        if max_total:
            note = len(f"({len(hits)} more not shown: the hook's --max-total)") + 1
            reserve = note if i < len(hits) - 1 or left_out else 0
            if total + len(line) + 1 + reserve > max_total:
                fit = max_total - total - note - 1 - len("- ") - len(" …") - len(tail)
                if fit < 40:  # not even 40 characters of its text: left out, try the next
                    left_out += 1
                    continue
                line = f"- {body[:fit].rstrip()} …{tail}"
        lines.append(line)
        total += len(line) + 1
    if left_out:
        lines.append(f"({left_out} more not shown: the hook's --max-total)")
    return "\n".join(lines) + "\n"


def as_output(markdown: str, fmt: str = "markdown") -> str:
    """What the hook prints for ``markdown`` in ``fmt`` (H8): the Markdown itself, or
    Claude Code's ``hookSpecificOutput`` JSON; ``''`` when there is nothing to say."""
    if not markdown or fmt == "markdown":
        return markdown
    return (
        json.dumps(
            {
                "hookSpecificOutput": {
                    "hookEventName": "UserPromptSubmit",
                    "additionalContext": markdown,
                }
            },
            ensure_ascii=False,
        )
        + "\n"
    )


def check_request(req: Dict[str, Any]) -> None:
    """Refuse a hook request with a bad field (H5), naming the option (the hook checks
    its options with this, and the server each request it gets)."""
    limit = req.get("limit")
    max_chars: Any = req.get("max_chars")
    max_total: Any = req.get("max_total")
    for name, v in (("--limit", limit), ("--max-chars", max_chars), ("--max-total", max_total)):
        if (isinstance(v, bool) or not isinstance(v, int)) and not (
            v is None and name == "--limit"
        ):
            raise HookFault(f"{name}: expected an integer, got {v!r}")
    if limit is not None and not 1 <= limit <= 100:
        raise HookFault(f"--limit: must be from 1 to 100, got {limit}")
    if max_chars < 0:
        raise HookFault(f"--max-chars: must be 0 or more, got {max_chars}")
    if max_total < 0:
        raise HookFault(f"--max-total: must be 0 or more, got {max_total}")
    r = req.get("min_relevance")
    if r is not None and (
        isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 <= r <= 1
    ):
        raise HookFault(f"--min-relevance: must be a number from 0 to 1, got {r}")
    if req.get("format") not in FORMATS:
        raise HookFault(
            f"--format: expected one of {', '.join(FORMATS)}, got {req.get('format')!r}"
        )
    for name in ("prompt",):
        if not isinstance(req.get(name), str):
            raise HookFault(f"{name}: expected text")
    for name in ("session",):
        if req.get(name) is not None and not isinstance(req.get(name), str):
            raise HookFault(f"{name}: expected text or null")
    scope = req.get("scope")
    if (
        scope is not None
        and not isinstance(scope, str)
        and not (
            isinstance(scope, list)
            and 1 <= len(scope) <= 2
            and all(isinstance(s, str) for s in scope)
        )
    ):
        raise HookFault("scope: expected text, a list of one or two texts, or null")


def recall_options(req: Dict[str, Any]) -> RecallOptions:
    """The recall of the hook request ``req`` (:func:`check_request`'s fields): its
    ``limit``, ``scope``, ``session``, ``topic_gate`` and ``min_relevance``, without the
    touch (the hook touches after it prints). A request without ``min_relevance`` gets
    :data:`~sqlite_rrf.core.relevance.DEFAULT_MIN_RELEVANCE`; without ``limit``, the
    statement's."""
    from ..core.options import RecallOptions

    if "min_relevance" in req:
        floor = req["min_relevance"]
    else:
        from ..core.relevance import DEFAULT_MIN_RELEVANCE

        floor = DEFAULT_MIN_RELEVANCE
    return RecallOptions(
        limit=req.get("limit"),
        scope=req.get("scope"),
        session=req.get("session"),
        touch=False,
        topic_gate=bool(req.get("topic_gate")),
        min_relevance=floor,
    )


def respond(store: Store, req: Dict[str, Any]) -> Any:
    """The output for the hook request ``req`` (:func:`check_request`'s fields) from
    ``store``, and the recall's result to touch after it is printed (None when there is
    nothing to touch): ``(text, result)``. The hook in process and the server both use
    this, so their output is the same; the recall is :func:`recall_options`'."""
    prompt = req["prompt"]
    if not prompt.strip():
        return "", None
    result = store.recall(prompt, options=recall_options(req))
    markdown = render(list(result), req.get("scope"), req["max_chars"], max_total=req["max_total"])
    return as_output(markdown, req["format"]), result
