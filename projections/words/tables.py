"""The plain sentences behind the words' functions: one table per kind of term.

Pure data. Each key is a value, reason or term a person meets in ``status``,
``check``, ``history`` or the report; each sentence says what it means without
the specification's shorthand (the rule ids live in the comments beside them).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = [
    "CONFIG_TERMS",
    "COVERAGE_TERMS",
    "DECISIONS",
    "KIND_PHRASES",
    "REASONS",
    "REASON_LABELS",
    "REASON_PHRASES",
    "REWARD_TERMS",
    "RULES",
    "RULE_NAMES",
    "SIDE_WORDS",
]

#: REC-20's decision values (the table above REC-20 in recovery.md).
DECISIONS: Final[Mapping[str, str]] = MappingProxyType({
    "pending": "No attempt has been made yet; the next resume dispatches the first "
    "one.",
    "retry": "The rollout may run again: the next resume dispatches a fresh attempt.",
    "rejudge": "A saved answer waits to be graded again by the judge alone, without "
    "calling the model.",
    "complete": "The rollout has a result that stands; nothing more runs for it.",
    "held": "The rollout kept an answer or an omission that needs an operator's "
    "decision; nothing runs until someone approves it.",
    "terminal": "The producer marked the failure as final; the rollout is never "
    "run again.",
    "exhausted": "The rollout reached its attempt cap or its limit of free attempts; "
    "nothing more runs unless the cap is extended or the budget reset.",
    "omitted": "The rollout was left out on purpose and the omission is accepted; "
    "no score is invented for it.",
})  # fmt: skip

#: The reasons of coverage's splits (REC-41) and every other reason decide gives.
REASONS: Final[Mapping[str, str]] = MappingProxyType({
    # complete (REC-20.4e, 5a, 5d, REC-21, REC-31)
    "graded": "The result row carries a reward from the verifier, and it stands.",
    "graded_failure": "The attempt failed, but a grade was recorded for it; that grade "
    "stands (running it again would replace it).",
    "settled_zero": "The model's own failure without a grade (it ran out of its own "
    "time limit, or failed on its side with an answer kept): the rollout is scored "
    "zero, the model's own result, and never runs again.",
    "rejudged": "The saved answer was graded again by the judge, and the new grade "
    "stands.",
    "infra_cut": "An infrastructure timeout cut the attempt short and the attempt cap "
    "is reached; the grade it recorded stands.",
    "unscored": "The result row has no reward: the rollout is complete but has no "
    "score.",
    # retry (REC-4, REC-13, REC-23)
    "unknown": "An attempt started but never recorded an outcome (the process died "
    "mid-request); it runs again without spending the attempt budget.",
    "free": "The attempt failed in a way not charged to the attempt budget (the "
    "collector was cancelled, killed or shut down, or the request was never sent); "
    "it runs again.",
    "failed": "The attempt failed and counts toward the attempt cap; it runs again "
    "while the cap allows.",
    # held (REC-20.4c, REC-23, REC-20.5h, REC-35)
    "masked_without_artifact": "The result was masked: it kept an answer but no grade. "
    "It waits for an operator to approve running it again.",
    "route_kept_response": "The request to the agent failed on its way, but a response "
    "was kept; running the agent again could duplicate that answer, so it waits for "
    "an operator.",
    "kept_answer": "The attempt failed on the evaluation side (or its side is unknown) "
    "but kept a saved answer; it is never sampled again or scored without an "
    "operator.",
    "unaccepted_omission": "The rollout was left out on purpose, but no other rollout "
    "of its task is complete, so the omission waits for an operator.",
    # exhausted (REC-13, REC-4)
    "cap": "The attempt cap: how many counted failures a rollout may have. A rollout "
    "that reaches it stops (extend-attempts raises it, reset-budget clears the count).",
    "free_attempts": "The rollout reached the limit of free attempts (attempts that "
    "killed or lost the collector); it stops so it cannot loop forever.",
    # omitted (REC-35)
    "accepted": "An intentional omission, accepted because another rollout of the same "
    "task is complete.",
    # rejudge (REC-20.3, REC-33, REC-32, REC-20.4a, 5g, 5h, REC-82)
    "open_admission": "A judge-only grading of the saved answer was started but never "
    "finished; it is graded again.",
    "judge_failed": "The judge failed on the saved answer; it is graded again, and the "
    "failure counts toward the attempt cap.",
    "regrade": "The failure happened while grading and the answer was kept; the saved "
    "answer is graded again without calling the model.",
    "verification": "The attempt failed during verification with its answer kept; the "
    "saved answer is graded again.",
    # pending (ROW-64)
    "unfinished": "A multistage rollout saved some of its stages but not its final "
    "one; it goes on from its first missing stage.",
    "invalid_judge_response": "The judge's verdict could not be used; with the policy "
    "retry_invalid_judge_responses the saved answer is graded again.",
})  # fmt: skip

#: The other terms status, check and history print (coverage, REC-41; CLI-6).
COVERAGE_TERMS: Final[Mapping[str, str]] = MappingProxyType({
    "expected": "How many rollouts the run plans: every task times its rollouts.",
    "coverage": "How the run's rollouts split by decision, each decision by reason; "
    "the counts add up to the rollouts expected.",
    "masked": "Rollouts whose selected result was masked by its producer (a result "
    "row that stands in for a failure).",
    "suspect": "Rollouts with three or more free attempts since the last budget "
    "reset: something keeps killing the collector on them.",
    "tasks complete": "Tasks whose rollouts are all complete or accepted omissions.",
    "tasks partial": "Tasks with some complete rollouts and some still unfinished.",
    "tasks none": "Tasks with no complete rollout yet.",
    "failure kind": "What went wrong in a failed attempt (a timeout, a lost session, "
    "a judge error, ...), as the collector recorded it.",
    "side": "Who a failure kind is blamed on: the model (its own result) or the "
    "infrastructure (our servers, sandboxes, judges), which may run again.",
    "counted failure": "A failed attempt that counts toward the attempt cap.",
    "free attempt": "An attempt that does not count toward the cap: it never reached "
    "the model, or the collector itself died.",
    "attempts reserved": "Attempts the collector started (each is reserved before "
    "it is sent).",
    "outcomes": "Attempts that recorded a result or a failure.",
    "duplicates": "Rows recorded twice for the same attempt; the first one counts.",
    "superseded": "Outcomes replaced by a later attempt of the same rollout.",
    "excluded sidecar lines": "Failure rows recorded before the latest budget reset, "
    "which no longer count toward any cap.",
    "extension": "Attempts added to every rollout's cap by extend-attempts.",
    "drift acceptances": "Times an operator accepted a changed configuration for "
    "this run.",
    "overrides": "Times a resume was forced past a changed configuration "
    "(--allow-unsafe).",
    "policy": "The run's recovery policy: the settings that decide how failures are "
    "retried, graded again or held (defaults when none was changed).",
    "pending repairs": "Rows a killed writer left in a collector file without "
    "recording them; the next writer records them (status --publish does).",
    "waiting to be adopted": "Rows another collector appended to the run's files "
    "without the ledger (NeMo Gym's own --resume, say); import adopts them.",
    "policy changes": "Times the recovery policy was changed for this run.",
    "config": "A short digest of the run's configuration, as saved when it was "
    "created; unverified when the run was imported without one.",
    "inputs": "A short digest of the run's materialized inputs (the tasks and their "
    "rollouts).",
    "source": "A short digest of the collector's source, when one was recorded.",
    "unverified": "No digest was recorded, so the run's configuration cannot be "
    "compared (typically an imported run).",
    "head seq": "The number of the latest event in the run's log; its hash seals "
    "every event before it.",
    "dispatch": "Attempts a resume releases to run now (first attempts and retries).",
    "held_planned": "Held rollouts a resume leaves alone until an operator approves "
    "them.",
    "rejudge_planned": "Saved answers a resume releases to be graded again by the "
    "judge alone.",
    "in_flight": "Attempts started since the latest resume that have no outcome yet; "
    "a resume never releases them twice.",
    "verified": "The event log's hash chain and the files it names still match what "
    "was recorded.",
})  # fmt: skip

#: The reward figures status leads with (projections.figures.metrics, issue 16).
REWARD_TERMS: Final[Mapping[str, str]] = MappingProxyType({
    "complete (share)": "How many rollouts are complete of the rollouts expected, "
    "and the share in percent.",
    "mean reward": "The mean of the selected results' rewards, with its standard "
    "error (±) and a 95% interval, over the scored rollouts only.",
    "scored rollouts": "Complete rollouts with a reward (graded, graded again, a "
    "settled zero or a recorded grade); the mean is taken over these.",
    "left out of the mean": "Rollouts with no reward in the figures: failed or "
    "missing ones (unless a counting option counts them as zero), masked, "
    "unscored, omitted, or waiting for a grade.",
    "pass@k": "The chance that at least one of k rollouts of a task is correct, "
    "averaged over tasks with at least k rollouts (the unbiased estimator).",
    "correct": "A rollout whose reward is at least the threshold status names (1 "
    "by default, the full reward of a 0/1 verifier); pass@k counts these.",
    "per task": "The mean reward of each task's scored rollouts; status names the "
    "lowest and the highest.",
    "--count-failure-classes-as-zero": "NeMo Gym 0.7.0's option: an unfinished "
    "rollout whose newest row is a failure counts as a reward of 0 in the figures.",
    "--count-missing-rollouts-as-zero": "NeMo Gym 0.7.0's option: a rollout with no "
    "row at all counts as a reward of 0 in the figures.",
})  # fmt: skip

#: The two configuration options create, resume, diff-config and run take: which
#: of NeMo Gym's files goes where (CLI-2). Their --help points here, once.
CONFIG_TERMS: Final[Mapping[str, str]] = MappingProxyType({
    "--config": "The collection settings, as a YAML or JSON file: what NeMo Gym's "
    "ng_collect_rollouts takes on its command line (agent_name, input_jsonl_fpath, "
    "num_repeats, num_samples_in_parallel, responses_create_params, ...), without "
    "the leading +. A server block given here is refused (exit 3), naming the file "
    "and the key: it belongs in --global-config.",
    "--global-config": "A NeMo Gym server configuration as it is: a file of ng_run's "
    "config_paths (e.g. resources_servers/NAME/configs/NAME.yaml, or env.yaml), "
    "which holds the server blocks. Give it once per file: the files are merged in "
    "order, as Hydra merges them. A collection setting given here is refused (exit "
    "3), naming the file and the key: it belongs in --config.",
})  # fmt: skip

#: A short phrase per reason, for one-line decisions (describe_decision).
REASON_PHRASES: Final[Mapping[str, str]] = MappingProxyType({
    "pending": "no attempt yet",
    "graded": "graded",
    "graded_failure": "failed, but its recorded grade stands",
    "settled_zero": "scored zero, the model's own result",
    "rejudged": "graded again by the judge; the new grade stands",
    "infra_cut": "cut short by infrastructure at the cap; its recorded grade stands",
    "unscored": "no reward recorded",
    "unknown": "no outcome recorded (the process died mid-request); not charged",
    "free": "not charged to the attempt budget",
    "failed": "counted toward the cap",
    "masked_without_artifact": "masked with an answer but no grade; waits for an "
    "operator's approval",
    "route_kept_response": "the route failed but a response was kept; waits for an "
    "operator's approval",
    "kept_answer": "kept an answer; waits for an operator's approval",
    "unaccepted_omission": "left out while no rollout of its task is complete; waits "
    "for an operator's approval",
    "cap": "the attempt cap is reached",
    "free_attempts": "too many free attempts (the collector kept dying)",
    "accepted": "left out on purpose; another rollout of its task is complete",
    "open_admission": "a judge-only grading was cut off",
    "unfinished": "stages saved, the final one missing; goes on from the first "
    "missing stage",
    "judge_failed": "the judge failed on the saved answer",
    "regrade": "the saved answer is graded again",
    "verification": "failed at verification; the saved answer is graded again",
    "invalid_judge_response": "the judge's verdict was unusable",
    "terminal": "the producer marked the failure final",
})  # fmt: skip

#: What each registered failure kind (ROW-34's table) means, as a clause.
KIND_PHRASES: Final[Mapping[str, str]] = MappingProxyType({
    "transport_unreachable": "a server could not be reached",
    "transport_peer_drop": "a server dropped the connection",
    "transport_timeout": "a server call timed out",
    "transport_local_resource": "the collector ran out of a local resource",
    "agent_request_failed": "the request to the agent failed on its way",
    "agent_run_error": "the agent failed while running",
    "environment_server_failed": "the environment server failed",
    "protocol_violation": "a server answered outside the protocol",
    "judge_failed": "the judge failed",
    "judge_unparseable": "the judge's answer could not be read",
    "verifier_error": "the verifier failed",
    "provider_unavailable": "the sandbox provider was unavailable",
    "provider_quota_exhausted": "the sandbox provider's quota ran out",
    "provider_oom_killed": "the sandbox ran out of memory (the model's side at the "
    "agent stage, the infrastructure's at any other)",
    "session_lost": "the sandbox session was lost",
    "session_expired": "the sandbox session expired",
    "session_release_failed": "the sandbox session could not be released",
    "cancelled": "the collector cancelled the attempt",
    "kill_shaped": "the collector was killed mid-attempt",
    "shutdown": "the collector shut down mid-attempt",
    "persistence_failed": "the result could not be saved",
    "cohort_incomplete": "the attempt's group did not complete",
    "agent_timeout": "the agent ran out of its time limit",
    "agent_command_not_allowed": "the agent ran a command it may not run",
    # A producer class, not a registered kind: an omission's (REC-35).
    "skipped": "the producer skipped the rollout",
    # ROW-22: retained producer routing names, said as the shared name they mean.
    "timeout_exceeded": "the agent ran out of its time limit",
    "judge_invalid": "the judge's answer could not be read",
    "remote_agent_error": "the agent failed while running",
})  # fmt: skip

#: ROW-34's sides, as a person says them.
SIDE_WORDS: Final[Mapping[str, str]] = MappingProxyType(
    {"evaluation": "infrastructure", "model": "model"}
)

#: The rule ids a decision carries (REC-20's branches, REC-4, REC-25, REC-35,
#: REC-81, REC-82) and the other rules the report's audit trail names.
RULES: Final[Mapping[str, str]] = MappingProxyType({
    "REC-20.1": "No attempt yet, or an attempt that started without recording an "
    "outcome: it runs (again) without spending the attempt budget.",
    "REC-20.2": "An intentional omission: accepted when another rollout of its task "
    "is complete, otherwise held for an operator.",
    "REC-20.3": "A judge-only grading of the saved answer: still open, graded again; "
    "graded, the new grade stands; failed, graded again while the cap allows.",
    "REC-20.4": "A result row: it stands unless it was masked or cut short by "
    "infrastructure.",
    "REC-20.4a": "A masked result whose failure happened while grading: the saved "
    "answer is graded again while the cap allows.",
    "REC-20.4b": "A masked result that blames the infrastructure: it counts as a "
    "failed attempt and runs again while the cap allows.",
    "REC-20.4c": "A masked result that kept an answer but no grade: held for an "
    "operator.",
    "REC-20.4d": "A result cut short by an infrastructure timeout: it runs again "
    "while the cap allows; at the cap its recorded grade stands.",
    "REC-20.4e": "A result row: complete with its reward, or without a score when it "
    "has none.",
    "REC-20.5": "A failure row: decided by what failed and what it kept.",
    "REC-20.5a": "The model ran out of its own time limit: complete, scored by its "
    "recorded grade or else zero; it never runs again.",
    "REC-20.5b": "The producer marked the failure final: terminal.",
    "REC-20.5c": "An infrastructure timeout cut the attempt short: it runs again "
    "while the cap allows; at the cap its recorded grade stands.",
    "REC-20.5d": "A failure with a recorded grade: complete with that grade.",
    "REC-20.5e": "The collector itself was cancelled, killed or shut down and kept no "
    "answer: it runs again without spending the attempt budget.",
    "REC-20.5f": "The request to the agent failed on its way: held when a response "
    "was kept, free when it was never sent, otherwise counted and run again.",
    "REC-20.5g": "A grading failure that kept the answer: the saved answer is graded "
    "again while the cap allows.",
    "REC-20.5h": "A failure that kept a saved answer: graded again when it failed at "
    "verification, scored zero when the model is to blame, otherwise held for an "
    "operator.",
    "REC-20.5i": "Any other failure: it counts toward the cap and runs again while "
    "the cap allows.",
    "REC-4": "Free attempts (the collector died or the request was never sent) do "
    "not spend the budget, but a rollout stops after too many of them.",
    "REC-13": "Counted failures since the latest budget reset are compared with the "
    "attempt cap.",
    "REC-16": "A budget reset: failures recorded before it no longer count toward "
    "any cap.",
    "REC-21": "A final agent timeout is the model's own result under the time limit: "
    "never run again.",
    "REC-22": "A masked infrastructure failure counts one failed attempt and runs "
    "again.",
    "REC-23": "A failed request to the agent never runs the agent twice over a kept "
    "response.",
    "REC-25": "An operator approved running exactly this attempt again; it counts "
    "toward the cap.",
    "REC-31": "The newest finished judge-only grading is the grade.",
    "REC-32": "A failed judge-only grading counts toward the cap.",
    "REC-33": "A judge-only grading cut off mid-way is simply graded again.",
    "REC-35": "An intentional omission is accepted only when another rollout of its "
    "task is complete.",
    "REC-40": "A run is complete when every rollout is complete or an accepted "
    "omission.",
    "REC-41": "Coverage: every rollout counted once, by decision and reason.",
    "ROW-64": "A multistage rollout whose final stage is not saved: it goes on from "
    "its first missing stage.",
    "REC-81": "With the policy retry_terminal_timeouts, an environment fault that the "
    "producer marked final runs again.",
    "REC-82": "With the policy retry_invalid_judge_responses, a result whose judge's "
    "verdict was unusable is graded again (or run again when no answer was kept).",
})  # fmt: skip

#: A few words for each rule a decision names, beside its id in the audit
#: trail's ``--json`` (CLI-8: "REC-20.5a final agent timeout").
RULE_NAMES: Final[Mapping[str, str]] = MappingProxyType({
    "REC-4": "free-attempt guard",
    "REC-20.1": "no outcome yet",
    "REC-20.2": "omission",
    "REC-20.3": "judge-only re-judgment",
    "REC-20.4a": "masked result with a regrade kind",
    "REC-20.4b": "masked infrastructure result",
    "REC-20.4c": "masked kept answer without a grade",
    "REC-20.4d": "infrastructure agent timeout",
    "REC-20.4e": "result",
    "REC-20.5a": "final agent timeout",
    "REC-20.5b": "terminal failure",
    "REC-20.5c": "infrastructure agent timeout",
    "REC-20.5d": "failure with a recorded grade",
    "REC-20.5e": "free lifecycle failure",
    "REC-20.5f": "route failure",
    "REC-20.5g": "regrade kind with a saved answer",
    "REC-20.5h": "kept saved answer",
    "REC-20.5i": "failure",
    "REC-81": "environment fault reopened by retry_terminal_timeouts",
    "REC-82": "invalid judge response",
    "REC-25": "approved rerun",
    "REC-35": "omission alongside completed tasks",
    "ROW-64": "multistage rollout whose final stage is not saved",
})  # fmt: skip

#: Each coverage reason as a few words (docs/glossary.md explains each).
REASON_LABELS: Final[Mapping[str, str]] = MappingProxyType({
    "graded": "graded",
    "graded_failure": "graded failure",
    "settled_zero": "settled as zero",
    "rejudged": "re-judged",
    "infra_cut": "cut short by infrastructure at the cap",
    "unscored": "no score",
    "unknown": "attempt outcome unknown",
    "free": "free retry",
    "failed": "failed",
    "masked_without_artifact": "masked without a grade",
    "route_kept_response": "response kept by a failed route",
    "kept_answer": "answer kept",
    "unaccepted_omission": "omission not accepted",
    "cap": "attempt cap reached",
    "free_attempts": "free attempts used up",
    "accepted": "accepted",
})  # fmt: skip
