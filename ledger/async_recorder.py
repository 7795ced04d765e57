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
from collections.abc import Callable, MutableMapping
from typing import Any

from ledger.events import JudgeAdmitted, StoredEvent
from ledger.judge import JudgeAdmission
from ledger.recorder import Prepared, Recorder, Staged

__all__ = ["AsyncRecorder"]

PrepareFn = Callable[[Staged], Prepared | None]


def _admission(stored: StoredEvent) -> JudgeAdmission:
    assert isinstance(stored.body, JudgeAdmitted)
    return JudgeAdmission.from_event(stored.body, at=stored.at)


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
        self._pending: list[tuple[PrepareFn, asyncio.Future[Any]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self.commits = 0  # transactions committed, for tests and benchmarks

    async def reserve(self, row: MutableMapping[str, Any]) -> int:
        """Reserve the row's released attempt; returns once it is durable (REC-3)."""
        result: int = await self._submit(
            lambda staged: self._recorder.prepare_reserve(row, staged)
        )
        return result

    async def record(self, row: MutableMapping[str, Any]) -> None:
        """Write the outcome row, then its event; returns once both are durable."""
        await self._submit(lambda staged: self._recorder.prepare_record(row, staged))

    async def admit_judgment(
        self, task: int, rollout: int, attempt: int, judge: str
    ) -> JudgeAdmission:
        """Admit a released re-judgment before the judge call (REC-30)."""
        stored: StoredEvent = await self._submit(
            lambda staged: self._recorder.prepare_admit(
                task, rollout, attempt, judge, staged
            ),
            returns_event=True,
        )
        return _admission(stored)

    async def save_judgment(
        self, admission: JudgeAdmission, row: MutableMapping[str, Any]
    ) -> None:
        """Save the re-judgment's row and close its admission (REC-30)."""
        await self._submit(
            lambda staged: self._recorder.prepare_judgment_row(
                admission.admission_id, row, staged
            )
        )

    async def _submit(self, prepare: PrepareFn, *, returns_event: bool = False) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        wrapped = prepare if not returns_event else _marking(prepare)
        self._pending.append((wrapped, future))
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        try:
            waited = False
            while self._pending:
                if not waited and len(self._pending) < self._max_batch:
                    await asyncio.sleep(self._max_wait)  # let company arrive
                waited = True  # later batches gathered while the last one committed
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
                results = await asyncio.to_thread(self._commit, [p for p, _ in batch])
                for (_, future), result in zip(batch, results, strict=True):
                    _settle(future, result)
        finally:
            self._flusher = None

    def _commit(self, prepares: list[PrepareFn]) -> list[Any]:
        results: list[Any] = [None] * len(prepares)
        with self._recorder.lock:
            staged = Staged()
            chosen: list[tuple[int, Prepared]] = []
            for position, prepare in enumerate(prepares):
                try:
                    op = prepare(staged)
                except Exception as exc:  # this call fails alone
                    results[position] = exc
                    continue
                if op is not None:
                    chosen.append((position, op))
            try:
                stored = self._recorder.commit(
                    [op for _, op in chosen], actor="collector"
                )
            except Exception as exc:  # the batch's transaction failed as a whole
                for position, _ in chosen:
                    results[position] = exc
                return results
        self.commits += 1
        for (position, op), event in zip(chosen, stored, strict=True):
            results[position] = event if op.result is _EVENT else op.result
        return results


class _EventMarker:
    """Marks a prepared operation whose caller wants the stored event back."""


_EVENT = _EventMarker()


def _marking(prepare: PrepareFn) -> PrepareFn:
    def marked(staged: Staged) -> Prepared | None:
        op = prepare(staged)
        if op is not None:
            op.result = _EVENT
        return op

    return marked


def _settle(future: asyncio.Future[Any], result: Any) -> None:
    if future.cancelled():
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)
