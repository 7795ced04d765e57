"""The reading half of ``Ledger``: events, the head, snapshots, and open checks.

Everything here reads the store a home opened and names the log by ``where``
(``ledger.db``'s path, or the run URL), so it serves a run in any home alike.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ledger.errors import CorruptLedger, UnknownEvent
from ledger.events import KINDS, ZERO_HASH, RunCreated, StoredEvent
from ledger.store.chain import (
    ChainBreak,
    chain_refusal,
    checked_rows,
    first_chain_break,
)
from ledger.store.decode import decode_row
from ledger.store.port import EventRow, EventStore

__all__ = ["LogReader"]


class LogReader:
    """Reads of one run's log, shared by writers, workers and readers."""

    def __init__(self, store: EventStore, where: str, *, check_head: bool) -> None:
        self._store = store
        #: The run's log, for messages: ``ledger.db``'s path, or the run URL.
        self.where = where
        self._check_head_on_open = check_head
        #: R-5: check every event read (``verify`` checks the whole chain itself).
        self._check_reads = check_head

    def _check_saved_work(self) -> None:
        # EV-12 / REC-51: refuse unknown or corrupt saved work before anything.
        unknown = sorted(self._store.distinct_kinds() - KINDS.keys(), key=repr)
        if unknown:
            # Scan rather than filter by kind: a kind that is not valid UTF-8
            # reads back changed and would match no stored text.
            first = next((r for r in self._store.rows() if r.kind not in KINDS), None)
            if first is None:  # the kind index names a kind no event has
                raise CorruptLedger(
                    f"the index of event kinds in {self.where} is damaged (it lists "
                    f"{unknown[0]!r}, which no event has); restore it from a backup, "
                    "or rebuild its indexes with sqlite3's REINDEX, then run "
                    "`rollout-ledger verify`",
                    path=self.where,
                )
            raise UnknownEvent(seq=first.seq, kind=first.kind, path=self.where)
        if self._check_head_on_open:  # verify opens without it, to report all
            self._check_head()

    def _check_head(self) -> None:
        # EV-12: the newest event must match its bytes and link to the one
        # before it; the full chain is `verify`'s (EV-2).
        tail = self._store.last_rows(2)
        if not tail:
            raise CorruptLedger(f"{self.where} holds no events", path=self.where)
        prev = bytes(tail[0].prev_hash) if len(tail) == 1 else bytes(tail[0].hash)
        start = tail[0].seq if len(tail) == 1 else tail[1].seq
        broken = first_chain_break(tail[-1:], from_seq=start, prev_hash=prev)
        if broken is not None:
            raise CorruptLedger(
                f"{self.where}: event seq {broken.seq}: {broken.reason}; "
                "run `rollout-ledger verify` for the full check",
                seq=broken.seq,
                path=self.where,
            )

    def events(
        self, from_seq: int = 1, *, kinds: Sequence[str] = ()
    ) -> Iterator[StoredEvent]:
        """Stored events in ``seq`` order from ``from_seq``, streamed (EV-13)."""
        db = self.where  # once, not per row: replay reads millions (P-3)
        for row in self.raw_events(from_seq, kinds=kinds):
            yield decode_row(row, path=db)

    def raw_events_at(self, seqs: Sequence[int]) -> Iterator[EventRow]:
        """The stored rows of ``seqs`` (those that exist), undecoded, by ``seq``."""
        return self._checked(self._store.rows_at(seqs), 1, chain=False)

    def rows_for_fold(self, from_seq: int = 1) -> Iterator[tuple[int, str, bytes]]:
        """``(seq, kind, body)`` of the stored events from ``from_seq``, undecoded.

        Replay's read (P-3); ``projections.fold.reading`` decodes them. The rows are
        the chain from ``from_seq`` (R-5: a command checks what it reads).
        """
        if not self._check_reads:
            return self._store.fold_rows(from_seq)
        after = ZERO_HASH if from_seq == 1 else self._store.hash_at(from_seq - 1)
        if after is None:
            if self._store.head()[0] < from_seq:
                return iter(())  # an empty tail has nothing to link to
            raise chain_refusal(self.where, from_seq - 1, "it is missing")
        return self._store.fold_rows(from_seq, after=after)

    def raw_events(
        self, from_seq: int = 1, *, kinds: Sequence[str] = ()
    ) -> Iterator[EventRow]:
        """Stored rows, undecoded, for chain checks and exports.

        R-5: each row read is checked; all of them from ``from_seq`` on as the
        chain they make, rows of some ``kinds`` each against its own hash.
        """
        rows = self._store.rows(from_seq, kinds=kinds)
        return self._checked(rows, from_seq, chain=not kinds)

    def _checked(
        self, rows: Iterator[EventRow], from_seq: int, *, chain: bool
    ) -> Iterator[EventRow]:
        # R-5 as amended: every command checks the head (at its open) and
        # every event it reads; `verify` opens without, to report every break
        # itself rather than stop at the first.
        if not self._check_reads:
            return rows
        before = (lambda: self._store.hash_at(from_seq - 1)) if chain else None
        return checked_rows(rows, where=self.where, from_seq=from_seq, prev_hash=before)

    def head(self) -> tuple[int, bytes]:
        """``(seq, hash)`` of the newest event."""
        return self._store.head()

    def run_created(self) -> RunCreated:
        """The run's first event."""
        first = next(self.events(1, kinds=["run_created"]), None)
        if first is None or first.seq != 1 or not isinstance(first.body, RunCreated):
            raise CorruptLedger(
                f"{self.where}: the first event is not run_created",
                seq=1,
                path=self.where,
            )
        return first.body

    def verify_chain(self) -> ChainBreak | None:
        """Recompute the whole hash chain; the first break, or ``None`` (EV-2)."""
        return first_chain_break(self._store.rows(1))

    def verify_chain_after(self, seq: int, head: bytes) -> ChainBreak | None:
        """The chain after a proven ``(seq, head)`` (issue 30): event ``seq``
        still carries ``head`` and every later event chains from it; the first
        break, or ``None``. Nothing at or below ``seq`` is recomputed."""
        if self._store.hash_at(seq) != head:
            return ChainBreak(
                seq=seq,
                reason="the event no longer carries the head hash proven for it",
            )
        return first_chain_break(
            self._store.rows(seq + 1), from_seq=seq + 1, prev_hash=head
        )

    def load_snapshot(
        self, code_version: str, policy_digest: str
    ) -> tuple[int, bytes, bytes] | None:
        """The stored snapshot for this code version and policy, if its chain holds.

        A snapshot counts only when the log still has its head hash at its seq.
        """
        found = self._store.load_snapshot(code_version, policy_digest)
        if found is None or self._store.hash_at(found[0]) != found[1]:
            return None
        return found

    def lock_holder(self) -> str | None:
        """Who holds a run on PostgreSQL's lock (SC-4); ``None`` when free.

        File-based runs name their holder in the lock file (``doctor``).
        """
        return self._store.lock_holder()

    @property
    def journal_mode(self) -> str:
        """``wal`` or ``delete`` (EV-42)."""
        return self._store.journal_mode()
