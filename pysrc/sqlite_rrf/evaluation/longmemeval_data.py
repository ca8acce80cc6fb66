"""LongMemEval's JSON format (``longmemeval_s`` and its kin, plain or ``.xz``): the
questions, their haystack sessions and turns, read and checked
(:func:`load_longmemeval`); each question's memory is its episodes of one unit, a
session or a user turn."""

from __future__ import annotations

import json
import lzma
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List

_DATE_RE = re.compile(r"^\s*(\d{4})/(\d{2})/(\d{2})(?:\s*\(\w+\))?\s*(\d{1,2}):(\d{2})\s*$")


class LongMemEvalFormatError(ValueError):
    """The file is not LongMemEval's JSON format (the message names the question and the
    fault)."""


@dataclass
class Turn:
    """One user turn: its episode id, text, LongMemEval corpus id and session."""

    episode_id: str
    content: str
    corpus_id: str
    session_id: str
    created_at: int


@dataclass
class LmeSession:
    """One haystack session: id, date (ms, UTC) and its messages."""

    session_id: str
    date_ms: int
    messages: List[Dict[str, Any]]


@dataclass
class LmeQuestion:
    """One question of LongMemEval with its haystack."""

    question_id: str
    question_type: str
    question: str
    question_date_ms: int
    answer_session_ids: List[str]
    sessions: List[LmeSession]
    turns: List[Turn] = field(default_factory=list)
    unit: str = "turn"

    @property
    def abstention(self) -> bool:
        """An abstention question (``_abs`` in its id): the memory cannot answer it."""
        return "_abs" in self.question_id

    @property
    def gold_turns(self) -> List[str]:
        """LongMemEval's correct docs: the corpus ids that contain ``answer``."""
        return sorted({t.corpus_id for t in self.turns if "answer" in t.corpus_id})

    @property
    def scored(self) -> bool:
        """Whether LongMemEval averages this question (not abstention, a gold user turn)."""
        return not self.abstention and any(
            m.get("role") == "user" and m.get("has_answer")
            for s in self.sessions
            for m in s.messages
        )


def parse_lme_date(text: str, where: str = "date") -> int:
    """``'2023/03/27 (Mon) 23:35'`` -> milliseconds since the epoch, read as UTC."""
    m = _DATE_RE.match(text) if isinstance(text, str) else None
    if not m:
        raise LongMemEvalFormatError(
            f"{where}: {text!r} is not a date like '2023/03/27 (Mon) 23:35'"
        )
    y, mo, d, h, mi = (int(g) for g in m.groups())
    try:
        dt = datetime(y, mo, d, h, mi, tzinfo=timezone.utc)
    except ValueError as e:
        raise LongMemEvalFormatError(f"{where}: {text!r}: {e}") from None
    return int(dt.timestamp() * 1000)


def _read_json(path: str) -> Any:
    try:
        if path.endswith(".xz"):
            with lzma.open(path, "rt", encoding="utf-8") as f:
                return json.load(f)
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise LongMemEvalFormatError(f"{path}: cannot read ({e.strerror or e})") from None
    except lzma.LZMAError as e:
        raise LongMemEvalFormatError(f"{path}: not an xz file ({e})") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise LongMemEvalFormatError(f"{path}: not JSON ({e})") from None


def is_longmemeval_file(path: str) -> bool:
    """True for a path that is not a directory and is named ``*.json`` or ``*.json.xz``:
    what ``sqlite-rrf eval`` reads as LongMemEval (a directory is a BEIR collection)."""
    return not os.path.isdir(path) and (path.endswith(".json") or path.endswith(".json.xz"))


_FIELDS = (
    "question_id",
    "question_type",
    "question",
    "question_date",
    "answer_session_ids",
    "haystack_dates",
    "haystack_session_ids",
    "haystack_sessions",
)


#: The episode units: one episode per user turn, or per session.
UNITS = ("session", "turn")
#: The unit ``sqlite-rrf eval`` uses unless told (see the module docstring).
DEFAULT_UNIT = "session"


def _sessions(q: LmeQuestion) -> List[Turn]:
    """One episode per session that has a non-empty user message: its user messages
    joined by a blank line, LongMemEval's corpus id (``process_item_flat_index``,
    granularity 'session': an evidence session without a has_answer user turn is
    renamed ``noans_…``)."""
    out: List[Turn] = []
    for si, s in enumerate(q.sessions):
        users = [
            m
            for m in s.messages
            if m.get("role") == "user"
            and isinstance(m.get("content"), str)
            and m["content"].strip()
        ]
        if not users:
            continue
        cid = s.session_id
        if "answer" in cid and not any(
            m.get("has_answer") for m in s.messages if m.get("role") == "user"
        ):
            cid = cid.replace("answer", "noans")
        out.append(
            Turn(
                episode_id=f"s{si}",
                content="\n\n".join(m["content"] for m in users),
                corpus_id=cid,
                session_id=s.session_id,
                created_at=s.date_ms,
            )
        )
    return out


def _turns(q: LmeQuestion) -> List[Turn]:
    """The episodes of a question: every non-empty user message, with LongMemEval's
    corpus id (``process_item_flat_index``, granularity 'turn')."""
    out: List[Turn] = []
    for si, s in enumerate(q.sessions):
        evidence = "answer" in s.session_id
        for ti, msg in enumerate(s.messages):
            if msg.get("role") != "user":
                continue
            content = msg.get("content")
            if not isinstance(content, str) or not content.strip():
                continue
            cid = f"{s.session_id}_{ti + 1}"
            if evidence and not msg.get("has_answer"):
                cid = cid.replace("answer", "noans")
            out.append(
                Turn(
                    episode_id=f"s{si}t{ti + 1}",
                    content=content,
                    corpus_id=cid,
                    session_id=s.session_id,
                    created_at=s.date_ms,
                )
            )
    return out


def load_longmemeval(path: str, unit: str = "turn") -> List[LmeQuestion]:
    """Read LongMemEval's JSON (a list of questions; ``.xz`` compressed or not); each
    question's ``turns`` are its episodes of ``unit`` (:data:`UNITS`).

    Raises:
        LongMemEvalFormatError: the file cannot be read, or a question lacks a field or
            has one of the wrong shape (the message names the question and the field).
    """
    if unit not in UNITS:
        raise ValueError(f"unit: must be one of {UNITS}, got {unit!r}")
    data = _read_json(path)
    if not isinstance(data, list) or not data:
        raise LongMemEvalFormatError(f"{path}: expected a non-empty JSON list of questions")
    out: List[LmeQuestion] = []
    seen = set()
    for i, x in enumerate(data):
        where = f"{path}: question {i}"
        if not isinstance(x, dict):
            raise LongMemEvalFormatError(f"{where}: expected an object")
        for f in _FIELDS:
            if f not in x:
                raise LongMemEvalFormatError(f"{where}: no {f!r} field")
        qid = x["question_id"]
        if not isinstance(qid, str) or not qid:
            raise LongMemEvalFormatError(f"{where}: question_id must be a non-empty string")
        where = f"{path}: question {qid!r}"
        if qid in seen:
            raise LongMemEvalFormatError(f"{where}: appears twice")
        seen.add(qid)
        for f in ("question_type", "question"):
            if not isinstance(x[f], str):
                raise LongMemEvalFormatError(f"{where}: {f} must be a string")
        sess, ids, dates = x["haystack_sessions"], x["haystack_session_ids"], x["haystack_dates"]
        if not (
            isinstance(sess, list)
            and isinstance(ids, list)
            and isinstance(dates, list)
            and len(sess) == len(ids) == len(dates)
        ):
            raise LongMemEvalFormatError(
                f"{where}: haystack_sessions, haystack_session_ids "
                "and haystack_dates must be lists of one length"
            )
        if not isinstance(x["answer_session_ids"], list):
            raise LongMemEvalFormatError(f"{where}: answer_session_ids must be a list")
        sessions = []
        for j, (s, sid, d) in enumerate(zip(sess, ids, dates)):
            if (
                not isinstance(sid, str)
                or not isinstance(s, list)
                or not all(isinstance(m, dict) for m in s)
            ):
                raise LongMemEvalFormatError(
                    f"{where}: session {j}: expected an id string and a list of messages"
                )
            sessions.append(LmeSession(sid, parse_lme_date(d, f"{where}: haystack_dates[{j}]"), s))
        q = LmeQuestion(
            question_id=qid,
            question_type=x["question_type"],
            question=x["question"],
            question_date_ms=parse_lme_date(x["question_date"], f"{where}: question_date"),
            answer_session_ids=[str(a) for a in x["answer_session_ids"]],
            sessions=sessions,
        )
        q.turns = _turns(q) if unit == "turn" else _sessions(q)
        q.unit = unit
        if not q.turns:
            raise LongMemEvalFormatError(f"{where}: the haystack has no user message")
        out.append(q)
    return out
