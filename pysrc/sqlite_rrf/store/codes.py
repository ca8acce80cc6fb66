"""The sign codes of the 'quantized' pool: one bit per dimension of every vector
(``episodes_codes``, migration 0007), packed in blocks (``episodes_code_blocks``,
migration 0008) that ``rrf_hamming_topk`` reads one block at a time.

A Store's own writes get their codes at once (the TEMP trigger of
:meth:`~sqlite_rrf.store.connection.Connection._code_vectors`) and packed in the write's
transaction; :meth:`Codes.compute_codes` computes those other clients left pending and
:meth:`Codes.pack_codes` packs loose codes; :meth:`Codes.fill_codes` does both.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..core.sqlite import transaction
from ..core.validate import vector_fault
from .connection import Connection


class Codes(Connection):
    """Computing and packing the sign codes."""

    #: Pending sign codes computed per transaction by :meth:`compute_codes`.
    CODES_BATCH = 20_000

    def fill_codes(self) -> int:
        """The codes' whole upkeep: compute the pending sign codes
        (:meth:`compute_codes`), then pack the loose ones into blocks (:meth:`pack_codes`).
        Returns how many codes were computed."""
        written = self.compute_codes()
        self.pack_codes()
        return written

    def compute_codes(self) -> int:
        """Compute the sign codes that are pending (vectors written by a client without
        the extension, or by the migration that made the codes table) and return how many
        were written; packing them is :meth:`pack_codes`'s. A vector that cannot be used
        (NaN, infinite, zero, wrong size) keeps a pending code: the quantized pool scores
        pending rows exactly, and the recall leaves such vectors out and names them in its
        warnings. The pending rows are read first, without a lock; only a batch with codes
        to write takes the write lock (its own transaction), and a code is written only if
        its vector is still the one read."""
        if self.readonly:
            return 0
        written = 0
        after = -(2**63)
        dim = self.dim
        while True:
            rows = self.conn.execute(
                "SELECT c.rowid, v.embedding FROM episodes_codes AS c "
                "INDEXED BY idx_episodes_codes_pending "
                "JOIN episodes_vectors AS v ON v.rowid = c.rowid "
                "WHERE c.code IS NULL AND c.rowid > ? ORDER BY c.rowid LIMIT ?",
                (after, self.CODES_BATCH),
            ).fetchall()
            if not rows:
                return written
            after = rows[-1][0]
            updates = []
            for rowid, emb in rows:
                if vector_fault(emb, dim) is None:
                    v = np.frombuffer(emb, "<f4")
                    updates.append(
                        (np.packbits(v > 0, bitorder="little").tobytes(), rowid, rowid, emb)
                    )
            if not updates:
                continue  # nothing to write in this batch: no write lock
            # a vector rewritten meanwhile cannot get the code of its old value
            with transaction(self.conn):
                for update in updates:
                    self.conn.execute(
                        "UPDATE episodes_codes SET code = ? WHERE rowid = ? AND code IS NULL "
                        "AND (SELECT embedding FROM episodes_vectors WHERE rowid = ?) = ?",
                        update,
                    )
                    written += self.conn.changes()

    #: Codes per block of ``episodes_code_blocks`` (migration 0008): the loose codes are
    #: packed once there are this many of them.
    CODE_BLOCK = 256
    #: Blocks packed per transaction by :meth:`pack_codes`.
    PACK_BATCH = 200

    def pack_codes(self, block: Optional[int] = None) -> int:
        """Pack the loose sign codes (computed, in no block) into new blocks of ``block``
        codes (default :attr:`CODE_BLOCK`), in rowid order, while there are at least that
        many, and return how many codes were packed. The quantized pool then reads those
        codes one block at a time (``rrf_hamming_topk``); codes left over stay loose and are
        read row by row. The Store calls this after its writes and after
        :meth:`fill_codes`; each batch of blocks is its own transaction."""
        if self.readonly:
            return 0
        size = self.CODE_BLOCK if block is None else int(block)
        if not 1 <= size <= 100_000:
            raise ValueError(f"block: must be from 1 to 100000, got {size}")
        packed = 0
        while True:
            # fewer loose codes than a block (the usual case on open): no write lock
            loose = self.conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM episodes_codes "
                "INDEXED BY idx_episodes_codes_loose WHERE block IS NULL AND code IS NOT NULL "
                "LIMIT ?)",
                (size,),
            ).fetchall()[0][0]
            if loose < size:
                return packed
            with transaction(self.conn):
                n = self._pack(size, self.PACK_BATCH)
            packed += n
            if n < size * self.PACK_BATCH:
                return packed

    def _pack(self, size: int, most: int) -> int:
        """In the caller's transaction: up to ``most`` blocks of ``size`` loose codes;
        the number of codes packed."""
        rows = self.conn.execute(
            "SELECT rowid, code FROM episodes_codes INDEXED BY idx_episodes_codes_loose "
            "WHERE block IS NULL AND code IS NOT NULL ORDER BY rowid LIMIT ?",
            (size * most,),
        ).fetchall()
        full = len(rows) - len(rows) % size
        if full == 0:
            return 0
        # one code length per block (a database has one dimension; this keeps a block
        # well-formed whatever the table holds)
        packed = 0
        start = 0
        while start + size <= full:
            chunk = rows[start : start + size]
            length = len(chunk[0][1])
            same = [r for r in chunk if len(r[1]) == length]
            start += size
            if len(same) != size:
                continue
            rowids = np.fromiter((r for r, _ in chunk), dtype="<i8", count=size).tobytes()
            codes = b"".join(c for _, c in chunk)
            # migration 0009: an open block (n = 0, empty) is named by its rows, then
            # filled in one UPDATE; any other way of writing a block dissolves it
            cur = self.conn.execute(
                "INSERT INTO episodes_code_blocks(n, rowids, codes) VALUES (0, x'', x'') "
                "RETURNING block"
            )
            number = cur.fetchall()[0][0]
            self.conn.executemany(
                "UPDATE episodes_codes SET block = ? WHERE rowid = ?",
                ((number, r) for r, _ in chunk),
            )
            self.conn.execute(
                "UPDATE episodes_code_blocks SET n = ?, rowids = ?, codes = ? WHERE block = ?",
                (size, rowids, codes, number),
            )
            packed += size
        return packed

    def _packed(self) -> int:
        """How many codes the blocks hold."""
        return self.conn.execute("SELECT coalesce(sum(n), 0) FROM episodes_code_blocks").fetchall()[
            0
        ][0]
