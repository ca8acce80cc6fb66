"""Which embedding model to use, and where its file comes from.

A model is named by a **spec**: a path to a GGUF file, or ``hf:ORG/REPO/FILE.gguf`` for a
file of a Hugging Face Hub repository (``FILE`` may contain ``/``; ``hf:ORG/REPO@REV/FILE``
pins a revision). An ``hf:`` model is downloaded once through ``huggingface_hub`` into its
cache (a progress bar is shown) and read from there afterwards; with ``HF_HUB_OFFLINE=1``
only the cache is used.

Which model, first that applies (:func:`choose_model`):

1. the model asked for (``--model`` on the command line, ``model=`` in Python);
2. the ``SQLITE_RRF_MODEL`` environment variable;
3. :data:`DEFAULT_MODEL`, a public GGUF (f16) build of all-MiniLM-L6-v2.

The model a database remembers (the one its embeddings were made with) is never loaded or
downloaded because the database names it: a database is data, and anyone who can write
to it could name any file or Hub repository. It is used when the user names it (1 or 2),
or when it is the default. When it names another model (:func:`foreign_model`), the
default is used only if it is already in the Hugging Face cache (it is not downloaded for
a database made with another model), and what to pass is said (:func:`foreign_hint`).

This module imports neither ``llama_cpp`` nor ``huggingface_hub`` until a model is
resolved, so the core package works without the ``embed`` extra.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional
from urllib.parse import urlparse

if TYPE_CHECKING:
    from ..store.binding import EmbedderLike

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_N_CTX",
    "INSTALL_HINT",
    "MODEL_ENV",
    "ModelNotFoundError",
    "ModelSpec",
    "choose_model",
    "foreign_hint",
    "foreign_model",
    "model_candidates",
    "parse_spec",
    "resolve_model",
]

#: The default embedding model: all-MiniLM-L6-v2 (384 dimensions, trained with a 256-token
#: window), the f16 GGUF build published on the Hugging Face Hub.
DEFAULT_MODEL = (
    "hf:second-state/All-MiniLM-L6-v2-Embedding-GGUF/all-MiniLM-L6-v2-ggml-model-f16.gguf"
)

#: The context (in tokens) the default model was trained with, and the embedder's default.
DEFAULT_N_CTX = 256

#: Environment variable naming the model (a spec: a path or ``hf:ORG/REPO/FILE.gguf``).
MODEL_ENV = "SQLITE_RRF_MODEL"

#: What to install for embedding.
INSTALL_HINT = "pip install 'sqlite-rrf[embed]'"

_HF_PREFIX = "hf:"


class ModelNotFoundError(FileNotFoundError):
    """The embedding model could not be found or fetched.

    The message names the model, why it is not available, and what to do.
    """


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model spec: a local ``path``, or a Hub ``repo_id`` + ``filename``."""

    text: str
    path: Optional[str] = None
    repo_id: Optional[str] = None
    filename: Optional[str] = None
    revision: Optional[str] = None

    @property
    def is_hub(self) -> bool:
        """True for an ``hf:`` spec."""
        return self.repo_id is not None

    @property
    def name(self) -> str:
        """The model file's name (what ``stats`` shows beside the spec)."""
        return os.path.basename(self.filename or self.path or self.text)


def parse_spec(spec: str) -> ModelSpec:
    """Parse a model spec (see the module docstring).

    Raises:
        ValueError: an ``hf:`` spec without ``ORG/REPO/FILE``, or an empty spec.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"a model is a GGUF file path or hf:ORG/REPO/FILE.gguf, got {spec!r}")
    spec = spec.strip()
    if not spec.startswith(_HF_PREFIX):
        return ModelSpec(text=spec, path=os.path.expanduser(spec))
    parts = spec[len(_HF_PREFIX) :].split("/")
    if len(parts) < 3 or not all(parts):
        raise ValueError(
            f"model {spec!r}: an hf: model is hf:ORG/REPO/FILE.gguf (for example {DEFAULT_MODEL})"
        )
    repo, revision = parts[1], None
    if "@" in repo:
        repo, revision = repo.split("@", 1)
        if not repo or not revision:
            raise ValueError(f"model {spec!r}: write a revision as hf:ORG/REPO@REVISION/FILE")
    return ModelSpec(
        text=spec, repo_id=f"{parts[0]}/{repo}", filename="/".join(parts[2:]), revision=revision
    )


def model_candidates(asked: Optional[str] = None, remembered: Optional[str] = None) -> List[str]:
    """The specs to try, in order: ``[asked]`` or ``[$SQLITE_RRF_MODEL]`` when given (a
    model named by the user is the only candidate), else ``[DEFAULT_MODEL]``. The
    database's ``remembered`` model is never a candidate of its own (see the module
    docstring); it is accepted for the callers that pass it."""
    if asked:
        return [asked]
    env = os.environ.get(MODEL_ENV, "").strip()
    if env:
        return [env]
    return [DEFAULT_MODEL]


def choose_model(asked: Optional[str] = None, remembered: Optional[str] = None) -> str:
    """The spec of the model to use: ``asked``, then ``$SQLITE_RRF_MODEL``, then
    :data:`DEFAULT_MODEL`; never the database's ``remembered`` model for its own sake."""
    return model_candidates(asked, remembered)[0]


def foreign_model(asked: Optional[str], remembered: Optional[str]) -> Optional[str]:
    """The database's ``remembered`` model when it names a model the user did not name and
    that is not the default: an ``hf:`` name, or a path with a directory, other than
    ``asked``, ``$SQLITE_RRF_MODEL`` and :data:`DEFAULT_MODEL`. Such a model is not loaded
    (and the default is not downloaded for such a database). ``None`` otherwise, also for a
    bare file name (what older databases remember, naming no place to load from)."""
    if not isinstance(remembered, str) or not remembered.strip():
        return None
    spec = remembered.strip()
    user = asked or os.environ.get(MODEL_ENV, "").strip()
    if user:
        return None  # the user's model is the one used; the fingerprint check decides
    if spec == DEFAULT_MODEL:
        return None
    if spec.startswith(_HF_PREFIX) or os.path.dirname(spec):
        return remembered
    return None


def foreign_hint(remembered: str) -> str:
    """What to say about a database's model that is not loaded (:func:`foreign_model`)."""
    return (
        f"this database's embeddings were made with the model {remembered!r}, which is "
        f"loaded only when you name it: pass --model {remembered!r} (or set "
        f"{MODEL_ENV}) if you trust it"
    )


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "on", "yes", "true")


def _hub_reachable() -> bool:
    """Whether the Hub's host name resolves: a quick answer (no request is sent) that
    spares a machine without network huggingface_hub's minute of retries."""
    host = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co").hostname
    try:
        socket.getaddrinfo(host or "huggingface.co", 443)
    except OSError:
        return False
    return True


def _fetch_hint(spec: ModelSpec) -> str:
    return (
        f"on a machine with network, run once `sqlite-rrf model {spec.text}` (it downloads "
        f"{spec.name} into the Hugging Face cache, which can be copied here), or pass "
        f"--model PATH (or set {MODEL_ENV}) to a GGUF embedding model you have"
    )


def resolve_model(spec: str, *, download: bool = True) -> str:
    """The local file of the model ``spec``; downloads an ``hf:`` model on first use.

    A path must exist. An ``hf:`` model comes from the Hugging Face cache when it is there
    (no network is used), else it is downloaded through ``huggingface_hub`` with a progress
    bar, unless ``download`` is false or ``HF_HUB_OFFLINE`` is set.

    Raises:
        ModelNotFoundError: the file does not exist, or the model is not cached and cannot
            be downloaded (offline, no network, no such repository or file); the message
            says what to do.
        ValueError: a malformed spec.
    """
    parsed = parse_spec(spec)
    if not parsed.is_hub:
        path = parsed.path or ""
        if not os.path.exists(path):
            raise ModelNotFoundError(
                f"embedding model not found: '{path}' does not exist; pass --model PATH (or "
                f"set {MODEL_ENV}) to a GGUF embedding model, or hf:ORG/REPO/FILE.gguf"
            )
        if not os.path.isfile(path):
            raise ModelNotFoundError(f"embedding model path '{path}' is not a file")
        return path
    repo_id, filename = parsed.repo_id, parsed.filename
    assert repo_id is not None and filename is not None  # a hub spec has both (parse_spec)
    try:
        import huggingface_hub
        from huggingface_hub.errors import (
            EntryNotFoundError,
            HfHubHTTPError,
            LocalEntryNotFoundError,
        )
    except ImportError:
        raise ModelNotFoundError(
            f"the model {parsed.text} comes from the Hugging Face Hub, which needs "
            f"huggingface_hub: {INSTALL_HINT}"
        ) from None
    cached = huggingface_hub.try_to_load_from_cache(repo_id, filename, revision=parsed.revision)
    if isinstance(cached, str) and os.path.isfile(cached):
        return cached
    if not download or _offline():
        why = "HF_HUB_OFFLINE is set" if _offline() else "downloads are off"
        raise ModelNotFoundError(
            f"the model {parsed.text} is not in the Hugging Face cache and {why}; "
            + _fetch_hint(parsed)
        )
    if not _hub_reachable():
        raise ModelNotFoundError(
            f"the model {parsed.text} is not in the Hugging Face cache and the Hub cannot be "
            "reached (no network); " + _fetch_hint(parsed)
        )
    try:
        return str(huggingface_hub.hf_hub_download(repo_id, filename, revision=parsed.revision))
    except LocalEntryNotFoundError:
        raise ModelNotFoundError(
            f"the model {parsed.text} is not in the Hugging Face cache and could not be "
            "downloaded (the Hub did not answer); " + _fetch_hint(parsed)
        ) from None
    except (EntryNotFoundError, HfHubHTTPError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelNotFoundError(
            f"the model {parsed.text} could not be downloaded ({first}); check ORG/REPO/FILE, "
            f"or pass --model PATH (or set {MODEL_ENV}) to a GGUF embedding model you have"
        ) from None


# ---- a model's fingerprint: how a database tells its model from another of the same size ----

#: Fixed texts whose embeddings identify a model. A database stores them with its first
#: embeddings and compares them with any later model's (:func:`fingerprint_cosine`).
FINGERPRINT_TEXTS = (
    "sqlite-rrf fingerprint: the quick brown fox jumps over the lazy dog.",
    "Production Postgres credentials are kept in Vault and rotate every 90 days.",
    "Mitochondria produce most of the chemical energy of the cell.",
)

#: Two models are the same when every fingerprint text embeds with at least this cosine
#: (quantisations of one model agree at 0.999 and above; different models far below).
FINGERPRINT_MIN_COSINE = 0.99


def fingerprint(embedder: EmbedderLike) -> bytes:
    """The embeddings of :data:`FINGERPRINT_TEXTS` as concatenated float32 bytes."""
    import numpy as np

    vecs = np.asarray(embedder.embed_many(list(FINGERPRINT_TEXTS), progress=False), dtype="<f4")
    return vecs.tobytes()


def fingerprint_cosine(a: bytes, b: bytes) -> Optional[float]:
    """The smallest cosine between matching texts of two fingerprints, or ``None`` when they
    cannot be compared (different sizes)."""
    import numpy as np

    n = len(FINGERPRINT_TEXTS)
    if len(a) != len(b) or len(a) % (4 * n) or not a:
        return None
    x = np.frombuffer(a, "<f4").astype(np.float64).reshape(n, -1)
    y = np.frombuffer(b, "<f4").astype(np.float64).reshape(n, -1)
    norms = np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1)
    if not np.all(norms > 0):
        return None
    return float(np.min(np.sum(x * y, axis=1) / norms))
