"""REC-20's branches 4 and 5 applied to one outcome's own facts, under a policy.

The fold classifies each recorded outcome once, so a rollout keeps a compact
code per outcome rather than its decoded facts (P-3), and REC-13's "counted"
and REC-4's "free" are read off the same classification that decides.
"""

from __future__ import annotations

from ledger import facts_rules
from ledger.policy.model import RecoveryPolicy
from ledger.rows.facts import RowFacts
from ledger.rows.failure_kinds import kind_info, kind_is

__all__ = [
    "BRANCHES",
    "CODES",
    "OMISSION",
    "REVALIDATED_FAULTS",
    "Branch",
    "classify",
    "is_terminal_failure",
]

# What a branch decides (see projections/decisions/rules.py):
#   "complete", "held", "terminal", "free" (a free retry), "retry" (counted,
#   retry), "rejudge" (counted, re-judge), "infra" (4d/5c: counted, retry; at
#   the cap infra_cut or exhausted).


class Branch(tuple[str, str, str, bool, bool]):
    """``(rule, action, reason, counted, free)`` of one outcome (REC-20, -13, -4)."""

    __slots__ = ()

    @property
    def rule(self) -> str:
        """The REC-20 branch, e.g. ``"REC-20.5c"``."""
        return self[0]

    @property
    def action(self) -> str:
        """complete, held, terminal, free, retry, rejudge or infra."""
        return self[1]

    @property
    def reason(self) -> str:
        """The decision's reason (coverage splits, CLI-8)."""
        return self[2]

    @property
    def counted(self) -> bool:
        """REC-13: whether this outcome counts toward the cap."""
        return self[3]

    @property
    def free(self) -> bool:
        """REC-4: whether this outcome is a free attempt."""
        return self[4]


def _branch(rule: str, action: str, reason: str, *, counted: bool = False) -> Branch:
    return Branch((f"REC-20.{rule}", action, reason, counted, action == "free"))


# Every branch an outcome can take. The fold stores an outcome's index in
# BRANCHES (P-3: a small int per outcome, shared by every process, so encoded
# states compare byte for byte); a new branch goes at the end.
OMISSION = _branch("2", "omission", "unaccepted_omission")
_4A = _branch("4a", "rejudge", "regrade", counted=True)
_4B = _branch("4b", "retry", "failed", counted=True)
_4C = _branch("4c", "held", "masked_without_artifact")
_4D = _branch("4d", "infra", "failed", counted=True)
_4E_GRADED = _branch("4e", "complete", "graded")
_4E_UNSCORED = _branch("4e", "complete", "unscored")
_5A_GRADED = _branch("5a", "complete", "graded_failure")
_5A_SETTLED = _branch("5a", "complete", "settled_zero")
_5B = _branch("5b", "terminal", "terminal")
_5C = _branch("5c", "infra", "failed", counted=True)
_5D = _branch("5d", "complete", "graded_failure")
_5E = _branch("5e", "free", "free")
_5F_HELD = _branch("5f", "held", "route_kept_response")
_5F_FREE = _branch("5f", "free", "free")
_5F_COUNTED = _branch("5f", "retry", "failed", counted=True)
_5G = _branch("5g", "rejudge", "regrade", counted=True)
_5H_VERIFICATION = _branch("5h", "rejudge", "verification", counted=True)
_5H_MODEL = _branch("5h", "complete", "settled_zero")
_5H_HELD = _branch("5h", "held", "kept_answer")
_5I = _branch("5i", "retry", "failed", counted=True)
# REC-82: under `retry_invalid_judge_responses`, a result whose judge's verdict
# was unusable is judged again (its answer kept), or run again without one.
_INVALID_JUDGE_REJUDGE = Branch(
    ("REC-82", "rejudge", "invalid_judge_response", True, False)
)
_INVALID_JUDGE_RETRY = Branch(("REC-82", "retry", "failed", True, False))
# REC-81: a GDPVal environment fault reopened by `retry_terminal_timeouts` is
# dispatched again, as the issue asks and 0.7.0 does: the environment could not
# evaluate the attempt (its reference or evaluation was missing), so the
# operator's opt-in asks for the rollout to run again.
_REOPENED_FAULT = Branch(("REC-81", "retry", "failed", True, False))

BRANCHES: tuple[Branch, ...] = (
    OMISSION, _4A, _4B, _4C, _4D, _4E_GRADED, _4E_UNSCORED, _5A_GRADED,
    _5A_SETTLED, _5B, _5C, _5D, _5E, _5F_HELD, _5F_FREE, _5F_COUNTED, _5G,
    _5H_VERIFICATION, _5H_MODEL, _5H_HELD, _5I,
    _INVALID_JUDGE_REJUDGE, _INVALID_JUDGE_RETRY, _REOPENED_FAULT,
)  # fmt: skip
#: A branch's index in BRANCHES.
CODES: dict[Branch, int] = {branch: code for code, branch in enumerate(BRANCHES)}


#: REC-81: environment faults NeMo Gym 0.7.0's GDPVal verifier writes and
#: re-validates on resume, so `retry_terminal_timeouts` reopens them too.
REVALIDATED_FAULTS = ("reference_missing", "eval_missing", "transport_ineligible")


def is_terminal_failure(facts: RowFacts, policy: RecoveryPolicy) -> bool:
    """REC-14, REC-15, REC-81: stamped terminal, unless opted-in and reopened.

    ``skipped`` is terminal whether or not it is stamped; the opt-in reopens a
    timeout (the agent's own deadline, as the failure-kind table marks it) and
    the environment faults of ``REVALIDATED_FAULTS``, never an omission.
    """
    kind = facts.selected_kind
    if kind_is(kind, "skipped"):  # a producer class, not a registered kind
        return True
    if not facts.terminal:
        return False
    info = kind_info(kind)
    reopened = (info is not None and info.agent_deadline) or kind_is(
        kind, *REVALIDATED_FAULTS
    )
    return not (policy.retry_terminal_timeouts and reopened and not facts.omitted)


def _result(facts: RowFacts, policy: RecoveryPolicy) -> Branch:
    if facts_rules.masked_regrade_kind(facts, policy) is not None:
        return _4A
    if facts_rules.masked_infrastructure_kind(facts, policy) is not None:
        return _4B
    if facts_rules.masked_kept_answer_kind(facts, policy) is not None:
        return _4C
    if facts_rules.is_infrastructure_agent_timeout(facts, policy):
        return _4D
    if facts.invalid_judge_response and policy.retry_invalid_judge_responses:
        kept = facts.keeps_saved_answer
        return _INVALID_JUDGE_REJUDGE if kept else _INVALID_JUDGE_RETRY
    return _4E_GRADED if facts.reward is not None else _4E_UNSCORED


def _route(facts: RowFacts, delivery: str) -> Branch:
    # REC-23: a kept response is never duplicated or replaced, whatever its delivery.
    if facts.keeps_response:
        return _5F_HELD
    return _5F_FREE if delivery == "not_sent" else _5F_COUNTED


def _kept_answer(facts: RowFacts, policy: RecoveryPolicy) -> Branch:
    if facts.stage == "verification":  # ROW-60, ROW-62, ROW-63
        return _5H_VERIFICATION
    if facts_rules.kind_side(facts, policy) == "model":
        return _5H_MODEL
    return _5H_HELD


def _failure(facts: RowFacts, policy: RecoveryPolicy) -> Branch:
    if facts_rules.is_final_agent_timeout(facts, policy):
        graded = facts_rules.has_recorded_grade(facts, policy)
        return _5A_GRADED if graded else _5A_SETTLED
    if is_terminal_failure(facts, policy):
        return _5B
    if facts.terminal and kind_is(facts.selected_kind, *REVALIDATED_FAULTS):
        return _REOPENED_FAULT  # terminal, but reopened (REC-81)
    if facts_rules.is_infrastructure_agent_timeout(facts, policy):
        return _5C
    if facts_rules.has_recorded_grade(facts, policy):
        return _5D
    if _free_lifecycle(facts):
        return _5E
    delivery = facts_rules.route_failure(facts)
    if delivery is not None:
        return _route(facts, delivery)
    if facts.keeps_saved_answer and facts_rules.is_regrade(
        facts.selected_kind, facts.stage, policy
    ):
        return _5G
    if facts.keeps_saved_answer:
        return _kept_answer(facts, policy)
    return _5I


def _free_lifecycle(facts: RowFacts) -> bool:
    # REC-4: the collector's own lifecycle ended the attempt and kept no answer;
    # which kinds are lifecycle kinds is the failure-kind table's to say.
    info = kind_info(facts.selected_kind)
    lifecycle = info is not None and info.lifecycle
    return lifecycle and not facts.keeps_saved_answer


def classify(facts: RowFacts, policy: RecoveryPolicy) -> Branch:
    """The REC-20 branch (4 for result rows, 5 for failure rows) of one outcome.

    Not cached here: the fold caches per policy (hashing a policy costs more
    than classifying), and a cache kept across folds would keep decoded facts
    alive (P-3).
    """
    if facts.row_kind == "result":
        return _result(facts, policy)
    return _failure(facts, policy)
