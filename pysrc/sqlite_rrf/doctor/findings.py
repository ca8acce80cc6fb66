"""What a check finds and reports: :class:`Finding`, :class:`Report`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

#: What to run to repair a database (named in every message that needs it).
REPAIR_HINT = "sqlite-rrf check DB --repair"

#: Tables a repair may create again when they are missing: derived from episodes.
DERIVED_TABLES = (
    "episodes_vectors",
    "episodes_codes",
    "episodes_code_blocks",
    "episodes_displaced",
)


@dataclass(frozen=True)
class Finding:
    """One thing found wrong: ``part`` is what it concerns (``integrity``, ``schema``,
    ``fts``, ``vectors``, ``codes``, ``blocks``, ``displaced``, ``knn``, ``embeddings``),
    ``message`` says what, ``repairable`` whether :func:`repair` fixes it."""

    part: str
    message: str
    repairable: bool = True
    name: Optional[str] = None  # the schema object concerned (part 'schema')


@dataclass
class Report:
    """What :func:`check` found (and, after :func:`repair`, what was repaired and what
    the check finds afterwards)."""

    findings: List[Finding] = field(default_factory=list)
    repaired: List[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when nothing was found."""
        return not self.findings

    def as_dict(self) -> Dict[str, Any]:
        """The report as JSON-ready data."""
        return {
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
            "findings": [
                {"part": f.part, "message": f.message, "repairable": f.repairable}
                for f in self.findings
            ],
            "repaired": list(self.repaired),
        }
