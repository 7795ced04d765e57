"""The benchmark harness of ``quality.md`` (P-1..P-9): ratios against baselines.

Run ``python -m bench --help``. Every figure is a ratio measured side by side in
one run against a baseline the harness also runs, in alternating rounds, each
measurement in a fresh child process (so its peak RSS is its own). Nothing here
is a test; ``tests/test_bench.py`` only checks that the harness runs.

The cost curve (``--only CURVE``, ``bench/curve.py``) measures P-4, P-8 and P-9
as whole commands at 10k, 100k and 1M rollouts against NeMo Gym 0.7.0: the
real one when its venv is given (``--incumbent-venv``, ``bench/ng070.py``) and
its imitation (``bench/incumbent.py``) everywhere.
"""
