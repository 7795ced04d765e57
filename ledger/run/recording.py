"""The recording half of ``Ledger``: reserve, record, admit and save (api.md, REC-3)."""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from typing import TYPE_CHECKING, Any

from ledger.errors import Refused
from ledger.events import JudgeAdmitted
from ledger.policy.judge import JudgeAdmission
from ledger.run.recorder import Recorder, Staged

if TYPE_CHECKING:
    from ledger.run.async_recorder import AsyncRecorder

__all__ = ["RecordingMixin"]


class RecordingMixin:
    """Collector-facing writes of a writer ``Ledger``; each group is one transaction."""

    _recorder: Recorder | None

    def direct_recorder(self) -> Recorder:
        """The synchronous recorder, for a caller that prepares a batch itself."""
        if self._recorder is None:
            raise Refused("this ledger is open read-only; recording needs the RunLock")
        return self._recorder

    def reserve(self, row: MutableMapping[str, Any]) -> int:
        """Reserve the row's released attempt durably, before its request is sent."""
        return self.reserve_many([row])[0]

    def reserve_many(self, rows: Iterable[MutableMapping[str, Any]]) -> list[int]:
        """Reserve many released attempts in one transaction (all or none)."""
        recorder = self.direct_recorder()
        with recorder.lock:
            staged = Staged()
            ops = [recorder.prepare_reserve(row, staged) for row in rows]
            recorder.commit(ops, actor="collector")
        return [op.result for op in ops]

    def record(self, row: MutableMapping[str, Any]) -> None:
        """Write one outcome row to ``OUT`` or the sidecar, then append its event."""
        self.record_many([row])

    def record_many(self, rows: Iterable[MutableMapping[str, Any]]) -> None:
        """Record many outcome rows: rows written and flushed, then one transaction."""
        recorder = self.direct_recorder()
        with recorder.lock:
            staged = Staged()
            ops = [recorder.prepare_record(row, staged) for row in rows]
            recorder.commit([op for op in ops if op is not None], actor="collector")

    def admit_judgment(
        self, task: int, rollout: int, attempt: int, judge: str
    ) -> JudgeAdmission:
        """Admit a released re-judgment before the judge call (REC-30)."""
        recorder = self.direct_recorder()
        with recorder.lock:
            op = recorder.prepare_admit(task, rollout, attempt, judge, Staged())
            stored = recorder.commit([op], actor="collector")[0]
        assert isinstance(stored.body, JudgeAdmitted)
        return JudgeAdmission.from_event(stored.body, at=stored.at)

    def save_judgment(
        self, admission: JudgeAdmission, row: MutableMapping[str, Any]
    ) -> None:
        """Write the re-judgment's row, then close its admission (REC-30)."""
        recorder = self.direct_recorder()
        with recorder.lock:
            op = recorder.prepare_judgment_row(admission.admission_id, row, Staged())
            recorder.commit([op], actor="collector")

    def recorder(
        self, *, max_batch: int = 256, max_wait_ms: float = 5
    ) -> AsyncRecorder:
        """An asyncio front: concurrent calls that arrive together share one commit."""
        from ledger.run.async_recorder import AsyncRecorder

        return AsyncRecorder(
            self.direct_recorder(), max_batch=max_batch, max_wait_ms=max_wait_ms
        )
