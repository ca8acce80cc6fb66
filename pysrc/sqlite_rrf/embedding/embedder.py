"""Text embeddings from a GGUF model through llama-cpp-python.

This module turns text into L2-normalised ``float32`` vectors for the vector side of
sqlite-rrf's recall. It needs the optional ``embed`` extra
(``pip install 'sqlite-rrf[embed]'``, which installs ``llama-cpp-python``); the import of
``llama_cpp`` is deferred until an :class:`Embedder` is created, so the rest of the
package works without it.

A model is named by a path or by ``hf:ORG/REPO/FILE.gguf`` (:mod:`sqlite_rrf.embedding.models`
says how one is chosen and fetched). The default is all-MiniLM-L6-v2 as an f16 GGUF,
384 dimensions, trained with a 256-token window, so the default ``n_ctx`` is 256.

Input handling (documented behaviour, never a crash):

* text longer than the context is **truncated at the token level** to its first
  ``n_ctx`` tokens (the leading special token included; the trailing separator is then
  cut off, exactly as llama-cpp-python's ``embed(..., truncate=True)`` does);
* empty or whitespace-only text raises :class:`EmbeddingError`;
* NUL characters are replaced by spaces, and lone surrogates (e.g. from
  ``surrogateescape`` decoding of binary data) by U+FFFD, so any ``str`` can be embedded;
* a missing model file, or an ``hf:`` model that is neither cached nor downloadable,
  raises :class:`ModelNotFoundError`; a file that is not a GGUF model, or that llama.cpp
  cannot load, raises :class:`EmbeddingError`.

Side effect: before ``llama_cpp`` is first imported, the environment variable
``OMP_WAIT_POLICY`` is set to ``PASSIVE`` unless it is already set (llama.cpp's OpenMP
threads otherwise spin-wait, which is slow and erratic when the CPUs are shared).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
from typing import Any, List, Optional, Sequence, Union

import numpy as np

from .models import (
    DEFAULT_N_CTX,
    INSTALL_HINT,
    MODEL_ENV,
    ModelNotFoundError,
    choose_model,
    parse_spec,
    resolve_model,
)

__all__ = [
    "MODEL_ENV",
    "Embedder",
    "EmbeddingError",
    "ModelNotFoundError",
    "default_model_path",
]

_GGUF_MAGIC = b"GGUF"

PathLike = Union[str, "os.PathLike[str]"]


def default_model_path() -> Optional[str]:
    """The local file of the model chosen when none is asked for, or ``None``.

    That model is ``$SQLITE_RRF_MODEL`` when set (a path, returned as given with ``~``
    expanded even if it does not exist, so that the error names it; or an ``hf:`` spec),
    else :data:`~sqlite_rrf.embedding.models.DEFAULT_MODEL`. An ``hf:`` model is looked up in the
    Hugging Face cache only: this function never downloads (:class:`Embedder` does).
    """
    spec = choose_model()
    parsed = parse_spec(spec)
    if not parsed.is_hub:
        return parsed.path
    try:
        return resolve_model(spec, download=False)
    except ModelNotFoundError:
        return None


class EmbeddingError(RuntimeError):
    """Embedding failed in a way the caller can act on.

    Raised for: ``llama-cpp-python`` not installed (install the ``embed`` extra), a model
    file that is not GGUF or that llama.cpp cannot load, a context size the model does
    not support, empty text, and a degenerate (zero or non-finite) model output.
    """


def _how_to_choose() -> str:
    return (
        f"pass --model PATH (or model=...), or set the {MODEL_ENV} environment "
        "variable, to a GGUF embedding model or hf:ORG/REPO/FILE.gguf"
    )


def _import_llama_cpp() -> Any:
    """Import ``llama_cpp`` lazily, turning its absence into an :class:`EmbeddingError`.

    Before the first import, ``OMP_WAIT_POLICY`` defaults to ``PASSIVE`` (unless the user
    set it): llama.cpp's CPU backend uses OpenMP, whose default spin-waiting made
    embedding 3-10x slower and erratic on machines with other busy processes.
    """
    if "llama_cpp" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import llama_cpp
    except ImportError as exc:
        raise EmbeddingError(
            "embedding needs llama-cpp-python, which is not installed "
            f"({exc}); install the 'embed' extra: {INSTALL_HINT}"
        ) from exc
    return llama_cpp


def _check_gguf(path: str) -> None:
    """Refuse anything that does not start with the 4-byte GGUF magic."""
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise EmbeddingError(f"cannot read model file '{path}': {exc}") from exc
    if magic != _GGUF_MAGIC:
        raise EmbeddingError(
            f"model file '{path}' is not a GGUF file (it starts with {magic!r}, "
            f"expected {_GGUF_MAGIC!r}); {_how_to_choose()}"
        )


def _sanitize(text: object) -> str:
    """Validate and clean one input text (see the module docstring)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    if "\x00" in text:
        text = text.replace("\x00", " ")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates: re-pair valid pairs, replace the rest with U+FFFD.
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if not text.strip():
        raise EmbeddingError("cannot embed empty text")
    return text


class Embedder:
    """Embeds text with a GGUF model via llama-cpp-python (``pip install 'sqlite-rrf[embed]'``).

    Every vector is ``float32``, of length :attr:`dim`, and L2-normalised (so the dot
    product of two vectors is their cosine similarity). Text longer than the context is
    truncated to its first :attr:`n_ctx` tokens.

    Args:
        model_path: the model: a GGUF file's path or ``hf:ORG/REPO/FILE.gguf`` (downloaded
            once into the Hugging Face cache); ``None`` chooses ``$SQLITE_RRF_MODEL``, else
            :data:`~sqlite_rrf.embedding.models.DEFAULT_MODEL`.
        n_ctx: context size in tokens, also the truncation length and the llama.cpp
            batch size. Use the window the model was trained with — 256 for the default
            all-MiniLM-L6-v2 (larger values embed long texts differently). It may not
            exceed the model's training context.
        n_threads: CPU threads for llama.cpp; ``None`` keeps llama-cpp-python's default.
        batch_size: number of texts handed to llama.cpp per call in :meth:`embed_many`.
        verbose: let llama.cpp print its loading and timing messages to stderr.

    Raises:
        ModelNotFoundError: the file does not exist, or an ``hf:`` model is not cached
            and cannot be downloaded.
        EmbeddingError: llama-cpp-python is missing, the file is not GGUF, llama.cpp
            cannot load it, or ``n_ctx`` exceeds the model's training context.
        ValueError: a non-positive ``n_ctx``, ``n_threads`` or ``batch_size``.

    Thread safety: one llama.cpp model/context is not thread-safe. Calls on one
    ``Embedder`` are therefore serialised by an internal lock; for parallel embedding
    create one ``Embedder`` per thread or process. While a model loads (with
    ``verbose=False``) ``sys.stderr`` is redirected process-wide to capture llama.cpp's
    messages.

    An ``Embedder`` can be used as a context manager; :meth:`close` frees the model.
    """

    def __init__(
        self,
        model_path: Optional[PathLike] = None,
        *,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: Optional[int] = None,
        batch_size: int = 32,
        verbose: bool = False,
    ) -> None:
        if isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or n_ctx < 8:
            raise ValueError(f"n_ctx must be an integer >= 8, got {n_ctx!r}")
        if n_threads is not None and (
            isinstance(n_threads, bool) or not isinstance(n_threads, int) or n_threads < 1
        ):
            raise ValueError(f"n_threads must be a positive integer or None, got {n_threads!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")

        if model_path is None:
            spec = choose_model()
        else:
            spec = model_path if isinstance(model_path, str) else os.fsdecode(model_path)
        resolved = resolve_model(spec)
        _check_gguf(resolved)

        llama_cpp = _import_llama_cpp()

        kwargs: dict = dict(
            model_path=resolved,
            embedding=True,
            n_ctx=n_ctx,
            n_batch=n_ctx,
            n_ubatch=n_ctx,
            verbose=verbose,
        )
        if n_threads is not None:
            kwargs["n_threads"] = n_threads
            kwargs["n_threads_batch"] = n_threads

        captured = io.StringIO()
        redirect = contextlib.redirect_stderr(captured) if not verbose else contextlib.nullcontext()
        try:
            with redirect:
                llm = llama_cpp.Llama(**kwargs)
        except Exception as exc:  # llama-cpp-python raises ValueError/RuntimeError
            detail = captured.getvalue().strip()
            raise EmbeddingError(
                f"llama.cpp could not load the model '{resolved}' ({exc}): the file is "
                "corrupt or truncated, or not a model this llama.cpp version supports"
                + (f"; llama.cpp said: {detail[-500:]}" if detail else "")
                + f"; {_how_to_choose()}"
            ) from exc

        try:
            n_ctx_train = int(llm._model.n_ctx_train())
        except Exception:  # pragma: no cover - private API changed
            n_ctx_train = 0
        if n_ctx_train > 0 and n_ctx > n_ctx_train:
            with contextlib.suppress(Exception):
                llm.close()
            # Positions beyond the training window make llama.cpp abort the process.
            raise EmbeddingError(
                f"n_ctx={n_ctx} exceeds the training context of '{resolved}' "
                f"({n_ctx_train} tokens); use n_ctx <= {n_ctx_train}"
            )

        self._llm: Any = llm
        self._lock = threading.Lock()
        self._model_path = resolved
        # what the database remembers: the hf: name, or the file's absolute path
        self._model_spec = spec if parse_spec(spec).is_hub else os.path.abspath(resolved)
        self._n_ctx = n_ctx
        self._dim = int(llm.n_embd())
        self._batch_size = batch_size
        self._verbose = verbose

    # -- properties ---------------------------------------------------------------------

    @property
    def dim(self) -> int:
        """Embedding dimension (the model's ``n_embd``; 384 for all-MiniLM-L6-v2)."""
        return self._dim

    @property
    def model_path(self) -> str:
        """Path of the loaded GGUF file, as resolved."""
        return self._model_path

    @property
    def model_spec(self) -> str:
        """The model as it was named: a path, or ``hf:ORG/REPO/FILE.gguf``."""
        return self._model_spec

    @property
    def model_name(self) -> str:
        """File name of the model (the basename of :attr:`model_path`)."""
        return os.path.basename(self._model_path)

    @property
    def n_ctx(self) -> int:
        """Context size in tokens; longer texts are truncated to this many tokens."""
        return self._n_ctx

    @property
    def batch_size(self) -> int:
        """Number of texts per llama.cpp call in :meth:`embed_many`."""
        return self._batch_size

    # -- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        """Free the model. Further calls raise :class:`EmbeddingError`. Idempotent."""
        with self._lock:
            llm, self._llm = self._llm, None
        if llm is not None:
            with contextlib.suppress(Exception):
                llm.close()

    def __enter__(self) -> "Embedder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Embedder(model={self.model_name!r}, dim={self._dim}, n_ctx={self._n_ctx})"

    def fingerprint(self) -> bytes:
        """The model's fingerprint (:func:`~sqlite_rrf.embedding.models.fingerprint`: the
        embeddings of a few fixed texts, which a database compares with its own), computed
        once per model file: kept in :func:`fingerprint_cache_path` under the file's real
        path, size and modification time (ns), with the context size, the texts and
        llama-cpp-python's version, so a changed file (or llama.cpp) is embedded again. A
        cache that cannot be read or written is ignored."""
        key = _fingerprint_key(self._model_path, self._n_ctx)
        if key is not None:
            found = _fingerprint_cache_read().get(key)
            if isinstance(found, str):
                try:
                    fp = bytes.fromhex(found)
                except ValueError:
                    fp = b""
                if fp and len(fp) == 4 * self._dim * len(_fingerprint_texts()):
                    return fp
        from .models import fingerprint

        fp = fingerprint(self)
        if key is not None and key == _fingerprint_key(self._model_path, self._n_ctx):
            _fingerprint_cache_write(key, fp)
        return fp

    # -- embedding ----------------------------------------------------------------------

    def _live(self) -> Any:
        if self._llm is None:
            raise EmbeddingError("this Embedder has been closed")
        return self._llm

    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text`` (special tokens included) before truncation.

        Texts with more than :attr:`n_ctx` tokens are truncated by :meth:`embed`.
        """
        clean = _sanitize(text)
        with self._lock:
            return len(self._live().tokenize(clean.encode("utf-8")))

    def _embed_batch(self, texts: List[str]) -> np.ndarray:
        """Embed already-sanitised texts in one llama.cpp call; rows L2-normalised."""
        with self._lock:
            llm = self._live()
            try:
                raw = llm.embed(texts, normalize=False, truncate=True)
            except Exception as exc:
                raise EmbeddingError(f"llama.cpp failed to embed: {exc}") from exc
        try:
            out = np.asarray(raw, dtype=np.float64)
        except (ValueError, TypeError) as exc:
            raise EmbeddingError(f"unexpected embedding output from the model: {exc}") from exc
        if out.shape != (len(texts), self._dim):
            raise EmbeddingError(
                f"the model returned embeddings of shape {out.shape}, expected "
                f"({len(texts)}, {self._dim}); is it an embedding model with pooling?"
            )
        if not np.isfinite(out).all():
            raise EmbeddingError("the model produced a non-finite embedding")
        norms = np.linalg.norm(out, axis=1)
        if (norms == 0).any() or not np.isfinite(norms).all():
            raise EmbeddingError("the model produced a zero-norm embedding")
        return (out / norms[:, None]).astype(np.float32)

    def embed(self, text: str) -> np.ndarray:
        """Embed one text.

        Returns a ``float32`` array of shape ``(dim,)`` with unit L2 norm. Text longer
        than :attr:`n_ctx` tokens is truncated to its first ``n_ctx`` tokens (so two texts
        that agree on those tokens get the same vector).

        Raises:
            TypeError: ``text`` is not a ``str``.
            EmbeddingError: ``text`` is empty or whitespace only, or the model output is
                degenerate.
        """
        return self._embed_batch([_sanitize(text)])[0]

    def embed_many(
        self,
        texts: Sequence[str],
        *,
        progress: Optional[bool] = None,
        desc: str = "embedding",
    ) -> np.ndarray:
        """Embed many texts, :attr:`batch_size` texts per llama.cpp call.

        Returns a ``float32`` array of shape ``(len(texts), dim)``, each row as
        :meth:`embed` would return it (equal up to float rounding); an empty sequence
        gives shape ``(0, dim)``. All texts are validated before any is embedded.

        Args:
            texts: the texts (a sequence of ``str``; a bare ``str`` is refused).
            progress: show a tqdm progress bar on stderr. ``None`` (default) shows one
                when there are more than 64 texts and stderr is a terminal.
            desc: label of the progress bar.

        Raises:
            TypeError: ``texts`` is a bare string, or an item is not a ``str``.
            EmbeddingError: an item is empty or whitespace only (its index is named), or
                the model output is degenerate.
        """
        if isinstance(texts, (str, bytes, bytearray)):
            raise TypeError("embed_many() takes a sequence of texts; use embed() for one text")
        items = list(texts)
        clean: List[str] = []
        for i, t in enumerate(items):
            try:
                clean.append(_sanitize(t))
            except TypeError as exc:
                raise TypeError(f"texts[{i}]: {exc}") from None
            except EmbeddingError as exc:
                raise EmbeddingError(f"texts[{i}]: {exc}") from None
        n = len(clean)
        out = np.empty((n, self._dim), dtype=np.float32)
        if n == 0:
            return out

        if progress is None:
            progress = n > 64 and stderr_isatty()
        bar = progress_bar(n, desc) if progress else None
        try:
            for start in range(0, n, self._batch_size):
                chunk = clean[start : start + self._batch_size]
                out[start : start + len(chunk)] = self._embed_batch(chunk)
                if bar is not None:
                    bar.update(len(chunk))
        finally:
            if bar is not None:
                bar.close()
        return out

    # -- blobs --------------------------------------------------------------------------

    @staticmethod
    def to_blob(vec: Any) -> bytes:
        """Serialise a 1-D vector as little-endian ``float32`` bytes (4 bytes per value).

        This is the BLOB layout stored in the database and read by ``vec_cosine``.

        Raises:
            ValueError: ``vec`` is not one-dimensional.
        """
        arr = np.asarray(vec, dtype="<f4")
        if arr.ndim != 1:
            raise ValueError(f"to_blob expects a 1-D vector, got shape {arr.shape}")
        return arr.tobytes()

    @staticmethod
    def from_blob(b: Union[bytes, bytearray, memoryview]) -> np.ndarray:
        """Parse little-endian ``float32`` bytes into a new (writable) ``float32`` array.

        Raises:
            ValueError: the length is not a multiple of 4.
        """
        raw = bytes(b)
        if len(raw) % 4:
            raise ValueError(
                f"a float32 vector blob must have a length divisible by 4, got {len(raw)} bytes"
            )
        return np.frombuffer(raw, dtype="<f4").astype(np.float32)


def stderr_isatty() -> bool:
    """Whether standard error is a terminal (where a progress bar is drawn); False when
    there is no standard error."""
    try:
        return bool(sys.stderr is not None and sys.stderr.isatty())
    except (AttributeError, ValueError):
        return False


def progress_bar(total: int, desc: str, unit: str = "text") -> Any:
    """A tqdm progress bar on standard error for ``total`` items of ``unit``, labelled
    ``desc`` (tqdm comes with the ``embed`` extra)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True)


# ---- the fingerprint cache (Embedder.fingerprint) ----

#: How many model files the fingerprint cache remembers (the most recent).
FINGERPRINT_CACHE_SIZE = 32


def fingerprint_cache_path() -> str:
    """``$XDG_CACHE_HOME/sqlite-rrf/fingerprints.json`` (``~/.cache/...`` when
    XDG_CACHE_HOME is not set): each model file's fingerprint, so that opening a database
    with a model does not embed the fingerprint texts every time."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sqlite-rrf", "fingerprints.json")


def _fingerprint_texts() -> Sequence[str]:
    from .models import FINGERPRINT_TEXTS

    return FINGERPRINT_TEXTS


def _fingerprint_key(path: str, n_ctx: int) -> Optional[str]:
    """The cache key of a model file as it is now, or None when it cannot be stat'ed."""
    import hashlib

    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return None
    try:
        from importlib.metadata import version

        llama = version("llama-cpp-python")
    except Exception:  # pragma: no cover - not installed as a distribution
        llama = "?"
    texts = hashlib.sha256("\0".join(_fingerprint_texts()).encode("utf-8")).hexdigest()[:16]
    return f"{real}|{st.st_size}|{st.st_mtime_ns}|{n_ctx}|{texts}|{llama}"


def _fingerprint_cache_read() -> dict:
    import json

    try:
        with open(fingerprint_cache_path(), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _fingerprint_cache_write(key: str, fp: bytes) -> None:
    """Add ``key``; written to a temporary file and renamed, so a reader never sees half."""
    import json
    import tempfile

    path = fingerprint_cache_path()
    data = _fingerprint_cache_read()
    data.pop(key, None)
    data[key] = fp.hex()
    while len(data) > FINGERPRINT_CACHE_SIZE:
        data.pop(next(iter(data)))
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".fingerprints.", dir=os.path.dirname(path))
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError:
        pass  # a cache that cannot be written: the next open embeds again
