"""``python -m cli``: the ``rollout-ledger`` command, for a child process of ours."""

from cli.main import main

if __name__ == "__main__":  # imported (a test importing every module), it runs nothing
    main(prog_name="rollout-ledger")
