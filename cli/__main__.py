"""``python -m cli``: the ``rollout-ledger`` command, for a child process of ours."""

from cli.main import main

main(prog_name="rollout-ledger")
