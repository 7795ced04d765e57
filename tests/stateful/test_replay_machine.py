"""R-3: deterministic replay, as a hypothesis state machine over a real ledger.

A real SQLite ledger (a ``History``, written through the public API) runs next
to a model: the list of every event it stored, read back as each step ends,
and an incremental view folded from them one by one with
``projections.fold.reading.apply``. Rules append events of every kind a run meets
(reservations, outcomes of every REC-20 branch, late rows, duplicates, judge
admissions and their outcomes, approvals, budget resets, extensions, policy
changes, drift, overrides, resumes, a torn tail repaired on reopen), reopen
the store, and store a snapshot (EV-14). After every step:

- the store holds exactly the model's events (seq, kind, hash), reopened or not;
- the incremental view equals a full refold, byte for byte;
- two refolds (from the store, and from the model's events) encode alike;
- a replay through a stored snapshot equals the full refold;
and a rule checks that the fold of a prefix equals the view at that step.

A ``policy_changed`` event reclassifies every outcome (REC-60), which the
compact view cannot do in place (it keeps a code per outcome, not the facts,
P-3): there the incremental view is refolded, exactly as a snapshot is
dropped when the policy digest changes (EV-14).

The last test refolds in fresh interpreters with other ``PYTHONHASHSEED``
values and compares the bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from ledger import JudgeAdmission
from ledger import events as ev
from projections import RunState, coverage, decide_all, replay
from tests.helpers_history import (
    OPERATOR,
    History,
    agent_timeout,
    failure,
    graded,
    legacy_failure,
    masked,
    omission,
)
from tests.internals import apply, policy_from_events, save_snapshot
from tests.test_replay_properties import KEYS, ROWS

# Not order="deterministic": it sorts str keys only, and the state keys rollouts
# by int. The fold inserts keys in log order, so equal logs give equal bytes.
_ENCODER = msgspec.msgpack.Encoder()


def encode(state: RunState) -> bytes:
    """The deterministic bytes of a state (R-3 compares these)."""
    return _ENCODER.encode(state)


def views(state: RunState) -> bytes:
    """The state with every decision and the coverage, as compared bytes."""
    decisions = [[*key, d] for key, d in decide_all(state).items()]
    return _ENCODER.encode([state, decisions, coverage(state).to_dict()])


class ReplayMachine(RuleBasedStateMachine):
    """A ledger, its events as a model, and an incremental view (R-3)."""

    @initialize(cap=st.integers(1, 3))
    def start(self, cap: int) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="replay-machine-"))
        self.run = History(self.folder, tasks=2, rollouts=2, cap=cap)
        self.events: list[ev.StoredEvent] = []
        self.encoded: list[bytes] = []  # the view's bytes after each event
        self.admissions: list[JudgeAdmission] = []
        self.view = RunState()
        self._catch_up()

    def teardown(self) -> None:
        if hasattr(self, "run"):
            self.run.close()
            shutil.rmtree(self.folder, ignore_errors=True)

    # -- the model follows the store -------------------------------------------------

    def _catch_up(self) -> None:
        """Read the events the last step stored and fold them into the view."""
        for event in self.run.led.events(len(self.events) + 1):
            self.events.append(event)
            if len(self.events) == 1 or event.kind == "policy_changed":
                self.view = replay(self.events)  # see the module docstring
            else:
                apply(self.view, event, policy_from_events(e.body for e in self.events))
            self.encoded.append(encode(self.view))

    # -- rules: the collector ------------------------------------------------------

    def _released(self, key: int) -> dict[str, Any] | None:
        task, rollout = KEYS[key]
        for row in self.run.replan().dispatch:
            if (row["_ng_task_index"], row["_ng_rollout_index"]) == (task, rollout):
                return row
        return None

    @rule(key=st.integers(0, len(KEYS) - 1), row=st.integers(0, len(ROWS) - 1))
    def attempt(self, key: int, row: int) -> None:
        released = self._released(key)
        if released is not None:
            attempt = self.run.led.reserve(released)
            self.run.record(*KEYS[key], attempt, ROWS[row])
        self._catch_up()

    @rule(rows=st.lists(st.integers(0, len(ROWS) - 1), min_size=2, max_size=3))
    def attempt_each(self, rows: list[int]) -> None:
        """One attempt on each rollout in turn, as a collector's batch."""
        for key, row in enumerate(rows):
            released = self._released(key)
            if released is not None:
                attempt = self.run.led.reserve(released)
                self.run.record(*KEYS[key], attempt, ROWS[row])
        self._catch_up()

    @rule(key=st.integers(0, len(KEYS) - 1), resume=st.booleans())
    def kill(self, key: int, resume: bool) -> None:
        """An attempt reserved whose process dies in flight (REC-4), then a resume."""
        released = self._released(key)
        if released is not None:
            self.run.led.reserve(released)
        if resume:
            self.run.resume_started()
        self._catch_up()

    @rule(key=st.integers(0, len(KEYS) - 1), row=st.integers(0, len(ROWS) - 1))
    def late_or_duplicate(self, key: int, row: int) -> None:
        """A zombie's row for an older attempt (REC-2), else a second row (REC-1)."""
        task, rollout = KEYS[key]
        records = replay(self.events).rollout(task, rollout).attempts
        reserved = [a for a in records if a.attempt in self._reserved(task, rollout)]
        zombies = [a for a in reserved[:-1] if not a.has_outcome]
        chosen = (zombies or reserved)[:1]
        for record in chosen:
            self.run.record(task, rollout, record.attempt, ROWS[row])
        self._catch_up()

    def _reserved(self, task: int, rollout: int) -> set[int]:
        return {
            e.body.attempt
            for e in self.events
            if isinstance(e.body, ev.AttemptReserved)
            and (e.body.task, e.body.rollout) == (task, rollout)
        }

    @rule(key=st.integers(0, len(KEYS) - 1))
    def admit(self, key: int) -> None:
        task, rollout = KEYS[key]
        for item in self.run.replan().rejudge:
            if (item.task, item.rollout) == (task, rollout):
                admission = self.run.led.admit_judgment(
                    task, rollout, item.attempt, "judge-1"
                )
                self.admissions.append(admission)
        self._catch_up()

    @precondition(lambda self: bool(self.admissions))
    @rule(graded=st.booleans())
    def save_judgment(self, graded: bool) -> None:
        admission = self.admissions.pop(0)
        row: dict[str, Any] = {
            "_ng_task_index": admission.task,
            "_ng_rollout_index": admission.rollout,
        }
        row.update({"reward": 0.5} if graded else {"_ng_failure_class": "judge_failed"})
        self.run.led.save_judgment(admission, row)
        self._catch_up()

    # -- rules: the operator and resume --------------------------------------------

    @rule(key=st.integers(0, len(KEYS) - 1), older=st.booleans())
    def approve(self, key: int, older: bool) -> None:
        task, rollout = KEYS[key]
        selected = replay(self.events).rollout(task, rollout).selected_attempt()
        if selected is not None:
            self.run.approve(task, rollout, max(selected - older, 0))
        self._catch_up()

    @rule(
        action=st.sampled_from(["reset", "extend", "policy", "resume", "identity"]),
        choice=st.integers(0, 4),
    )
    def operator(self, action: str, choice: int) -> None:
        """A budget reset, an extension, a policy change, a resume, or drift."""
        if action == "reset":
            self.run.reset()
        elif action == "extend":
            self.run.extend(choice % 3 + 1)
        elif action == "policy":
            self._change_policy(_POLICY_SETTINGS[choice])
        elif action == "resume":
            self.run.resume_started()
        else:
            self.run.led.append(self._identity_event(choice % 3), actor=OPERATOR)
        self._catch_up()

    def _change_policy(self, settings_: dict[str, Any]) -> None:
        current = self.run.policy().to_json_dict()
        dotted = {k.replace("__", "."): v for k, v in settings_.items()}
        if any(current.get(k, None) != v for k, v in dotted.items()):
            self.run.set_policy(**settings_)

    def _identity_event(self, which: int) -> ev.Event:
        identity = {"model": f"m-{len(self.events)}"}
        if which == 0:
            return ev.DriftAccepted(
                from_digest="a" * 64, to_digest="b" * 64,
                operational_keys=("timeout",), identity=identity,
            )  # fmt: skip
        if which == 1:
            return ev.IdentityAdopted(
                from_digest="a" * 64, to_digest="c" * 64, identity=identity
            )
        return ev.IdentityOverridden(
            from_digest="c" * 64, to_digest="d" * 64, semantic_keys=("model",),
            identity=identity, materialized_digest="e" * 64,
            source_digest="unverified", reason="test",
        )  # fmt: skip

    # -- rules: the store ---------------------------------------------------------

    @rule(action=st.sampled_from(["reopen", "torn_tail", "snapshot"]))
    def store(self, action: str) -> None:
        """Reopen the writer (after a torn tail, EV-12), or store a snapshot."""
        if action == "snapshot":
            state = replay(self.run.led, use_snapshot=False)
            save_snapshot(self.run.led, state, self.run.policy())
        if action == "torn_tail":
            with self.run.led.paths.out.open("ab") as handle:
                handle.write(b'{"_ng_task_index": 0, "rew')
        if action != "snapshot":
            self.run.reopen()
        self._catch_up()
        if action == "torn_tail":
            assert self.events[-1].kind == "tail_repaired"

    @rule(step=st.integers(min_value=0))
    def prefix_fold_equals_the_view_at_that_step(self, step: int) -> None:
        end = step % len(self.events) + 1
        assert encode(replay(self.events[:end])) == self.encoded[end - 1]

    # -- invariants -----------------------------------------------------------------

    @invariant()
    def store_holds_the_model_events(self) -> None:
        stored = [(e.seq, e.kind, e.hash) for e in self.run.led.events()]
        assert stored == [(e.seq, e.kind, e.hash) for e in self.events]

    @invariant()
    def incremental_view_equals_a_full_refold(self) -> None:
        full = replay(self.run.led, use_snapshot=False)
        assert encode(self.view) == encode(full)
        assert views(self.view) == views(full)

    @invariant()
    def two_refolds_are_byte_identical(self) -> None:
        first = views(replay(self.run.led, use_snapshot=False))
        assert views(replay(self.events)) == first
        assert views(replay(list(self.run.led.events()))) == first

    @invariant()
    def a_snapshot_replay_equals_the_full_refold(self) -> None:
        through = replay(self.run.led)  # a stored snapshot when one matches
        assert encode(through) == encode(self.view)


_POLICY_SETTINGS = [
    {"retry_terminal_timeouts": True},
    {"retry_terminal_timeouts": False},
    {"side_overrides__session_lost": "model"},
    {"fault_share": 0.25},
    {"max_free_attempts": 2},
]

ReplayMachine.TestCase.settings = settings(stateful_step_count=15)
TestReplayMachine = ReplayMachine.TestCase


# -- R-3 across processes --------------------------------------------------------------

_REFOLD = textwrap.dedent(
    """
    import sys

    import msgspec

    from ledger import Ledger
    from projections import coverage, decide_all, replay

    with Ledger.open(sys.argv[1]) as led:
        state = replay(led, use_snapshot=False)
    decisions = [[*key, d] for key, d in decide_all(state).items()]
    views = [state, decisions, coverage(state).to_dict()]
    sys.stdout.write(msgspec.msgpack.encode(views).hex())
    """
)


def _refold_in_child(out: Path, seed: str) -> bytes:
    root = Path(__file__).parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _REFOLD, str(out)],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
        env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(root)},
    )
    return bytes.fromhex(done.stdout)


def test_r_3_a_refold_in_a_fresh_process_gives_the_same_bytes(tmp_path: Path) -> None:
    with History(tmp_path, tasks=3, rollouts=2, cap=2) as run:
        run.attempt(graded(0.5), 0, 0)
        run.attempt(omission(), 0, 1)
        run.attempt(masked("session_lost", answer=True), 1, 0)
        run.approve(1, 0, 0)
        run.attempt(agent_timeout(last_status=503, grade=0.25), 1, 0)
        run.kill(1, 1)
        run.attempt(failure("judge_failed", stage="verification", answer=True), 2, 0)
        run.rejudge(legacy_failure("judge_failed"), 2, 0)
        run.attempt(legacy_failure("transient"), 2, 1)
        run.reset()
        run.extend(2)
        run.set_policy(
            side_overrides__session_lost="model", retry_terminal_timeouts=True
        )
        here = views(replay(run.led, use_snapshot=False))
        out = run.out
    seeds = ["0", "1", "4242", "random"]
    children = {seed: _refold_in_child(out, seed) for seed in seeds}
    assert all(data == here for data in children.values()), json.dumps(
        {seed: data == here for seed, data in children.items()}
    )
