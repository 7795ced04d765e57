"""REC-3 bookkeeping stays exact when a writer appends much and records later.

The writer's index folds appended bodies when it is next read; past
``IndexKeeper.max_unfolded`` unread bodies it is refolded from the log instead.
Either way it must equal a fold of the whole log.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import Ledger
from ledger.events import AttemptReserved, AttemptsReleased
from projections import resume
from tests.internals import INDEX_KINDS, IndexKeeper, WriteIndex
from tests.test_resume import Run


@pytest.mark.parametrize("limit", [1, 4096])
def test_rec_3_the_index_after_many_unread_appends_is_the_log_s_fold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    monkeypatch.setattr(IndexKeeper, "max_unfolded", limit)
    run = Run(tmp_path)
    try:
        with Ledger.open(run.out, lock=run.lock) as led:
            plan = resume(led, run.config, run.global_config).plan
            first, second = plan.dispatch[0], plan.dispatch[1]
            led.append_many(  # appended directly: nobody reads the index yet
                [
                    AttemptsReleased(dispatch=((0, 0, 5),), rejudge=()),
                    AttemptReserved(
                        task=0, rollout=0, attempt=5, run_id=first["_ng_run_id"]
                    ),
                ]
            )
            led.reserve(second)
            index = led.direct_recorder().index.encode()
            fold = WriteIndex.build(led.events(1, kinds=INDEX_KINDS)).encode()
            assert index == fold
            with pytest.raises(Exception, match="already reserved"):
                led.reserve({**first, "_ng_attempt_index": 5})
    finally:
        run.lock.release()
