"""``JudgeAdmission``: a re-judgment admitted before its judge call (REC-30)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ledger.events import JudgeAdmitted

__all__ = ["JudgeAdmission"]


class JudgeAdmission(BaseModel):
    """An open admission: which saved answer is judged, by which judge, since when.

    It mirrors the ``judge_admitted`` body plus the envelope's ``at``; a parity
    test fails when the two drift apart (house style, "One schema, not two").
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    admission_id: str
    task: int = Field(ge=0)
    rollout: int = Field(ge=0)
    attempt: int = Field(ge=0)
    judge: str
    admitted_at: str

    @classmethod
    def from_event(cls, body: JudgeAdmitted, *, at: str) -> JudgeAdmission:
        """The admission a stored ``judge_admitted`` event records."""
        return cls(
            admission_id=body.admission_id,
            task=body.task,
            rollout=body.rollout,
            attempt=body.attempt,
            judge=body.judge,
            admitted_at=at,
        )
