"""``AsyncRecorder``: hundreds of asyncio tasks reserving and recording at once.

Calls that arrive together are committed in one transaction (group commit):
the first call wakes a flusher that waits ``max_wait_ms`` for company, then
commits up to ``max_batch`` calls in a worker thread; calls arriving while a
commit runs form the next batch. Each call returns once its event is durable.
A call whose own checks fail (a row not reserved, an attempt not released)
fails alone; an I/O failure of the commit fails every call of that batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

from ledger.errors import ConfigError
from ledger.events import JudgeAdmitted, StoredEvent
from ledger.policy.judge import JudgeAdmission
from ledger.run.recorder import Recorder, Staged
from ledger.store.prepared import Prepared

__all__ = ["AsyncRecorder"]


def _admission(stored: StoredEvent) -> JudgeAdmission:
    assert isinstance(stored.body, JudgeAdmitted)
    return JudgeAdmission.from_event(stored.body, at=stored.at)


#: How a queued call is prepared: reserve and record (the hot calls, P-7) call
#: the recorder's method on their row; the rest call a prepared closure, the
#: last kind handing its caller the stored event.
_RESERVE, _RECORD, _CALL, _CALL_FOR_EVENT = range(4)
Call = tuple[int, Any, "asyncio.Future[Any]"]


class AsyncRecorder:
    """An asyncio front for a writer ledger's recorder (api.md)."""

    def __init__(
        self, recorder: Recorder, *, max_batch: int = 256, max_wait_ms: float = 5
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._recorder = recorder
        self._max_batch = max_batch
        self._max_wait = max(0.0, max_wait_ms) / 1000
        self._pending: list[Call] = []
        self._flusher: asyncio.Task[None] | None = None
        self.commits = 0  # transactions committed, for tests and benchmarks

    async def reserve(self, row: MutableMapping[str, Any]) -> int:
        """Reserve the row's released attempt; returns once it is durable (REC-3)."""
        result: int = await self._queue(_RESERVE, row)
        return result

    async def record(self, row: MutableMapping[str, Any]) -> None:
        """Write the outcome row, then its event; returns once both are durable."""
        await self._queue(_RECORD, row)

    async def admit_judgment(
        self, task: int, rollout: int, attempt: int, judge: str
    ) -> JudgeAdmission:
        """Admit a released re-judgment before the judge call (REC-30)."""

        def prepare(staged: Staged) -> Prepared | None:
            return self._recorder.prepare_admit(task, rollout, attempt, judge, staged)

        stored: StoredEvent = await self._queue(_CALL_FOR_EVENT, prepare)
        return _admission(stored)

    async def save_judgment(
        self, admission: JudgeAdmission, row: MutableMapping[str, Any]
    ) -> None:
        """Save the re-judgment's row and close its admission (REC-30)."""

        def prepare(staged: Staged) -> Prepared | None:
            return self._recorder.prepare_judgment_row(
                admission.admission_id, row, staged
            )

        await self._queue(_CALL, prepare)

    def _queue(self, how: int, what: Any) -> asyncio.Future[Any]:
        """Queue one call; its future settles once the call's batch committed."""
        # A plain function returning the future, and the call kept as data (no
        # closure per call): the per-call cost is what limits P-7 besides the
        # commit itself.
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((how, what, future))
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush())
        return future

    async def _flush(self) -> None:
        try:
            waited = False
            while self._pending:
                if not waited and len(self._pending) < self._max_batch:
                    await asyncio.sleep(self._max_wait)  # let company arrive
                waited = True  # later batches gathered while the last one committed
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
                results = await asyncio.to_thread(self._commit, batch)
                for (_, _, future), result in zip(batch, results, strict=True):
                    if future.cancelled():
                        continue
                    if isinstance(result, BaseException):
                        future.set_exception(result)
                    else:
                        future.set_result(result)
        finally:
            self._flusher = None

    def _prepare(self, batch: list[Call], results: list[Any]) -> list[_Chosen]:
        """Each call's checked operation; a call whose checks fail fails alone."""
        recorder, staged = self._recorder, Staged()
        reserve, record = recorder.prepare_reserve, recorder.prepare_record
        chosen: list[_Chosen] = []
        for position, (how, what, _) in enumerate(batch):
            op: Prepared | None
            try:
                if how == _RESERVE:
                    op = reserve(what, staged)
                elif how == _RECORD:
                    op = record(what, staged)
                else:
                    op = what(staged)
            except Exception as exc:  # this call fails alone
                results[position] = exc
                continue
            if op is not None:
                chosen.append((position, op, how == _CALL_FOR_EVENT))
        return chosen

    def _commit(self, batch: list[Call]) -> list[Any]:
        results: list[Any] = [None] * len(batch)
        with self._recorder.lock:
            chosen = self._prepare(batch, results)
            try:
                stored = self._recorder.commit(
                    [op for _, op, _ in chosen], actor="collector"
                )
            except ConfigError as exc:
                # On PostgreSQL the database refuses a batch when another
                # worker reserved one of its attempts first (SC-3): learn what
                # the others appended, prepare again, so that call fails alone.
                if not self._recorder.catch_up_now():
                    return _failed(results, chosen, exc)
                results = [None] * len(batch)
                chosen = self._prepare(batch, results)
                try:
                    stored = self._recorder.commit(
                        [op for _, op, _ in chosen], actor="collector"
                    )
                except Exception as again:  # the batch failed as a whole
                    return _failed(results, chosen, again)
            except Exception as exc:  # the batch's transaction failed as a whole
                return _failed(results, chosen, exc)
        self.commits += 1
        for (position, op, wants_event), event in zip(chosen, stored, strict=True):
            results[position] = event if wants_event else op.result
        return results


#: A prepared call: its position in the batch, its operation, and whether its
#: caller gets the stored event back.
_Chosen = tuple[int, Prepared, bool]


def _failed(results: list[Any], chosen: list[_Chosen], exc: BaseException) -> list[Any]:
    """Every prepared call of a batch whose transaction failed gets ``exc``."""
    for position, _, _ in chosen:
        results[position] = exc
    return results
