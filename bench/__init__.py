"""The benchmark harness of ``quality.md`` (P-1..P-7): ratios against baselines.

Run ``python -m bench --help``. Every figure is a ratio measured side by side in
one run against a baseline the harness also runs, in alternating rounds, each
measurement in a fresh child process (so its peak RSS is its own). Nothing here
is a test; ``tests/test_bench.py`` only checks that the harness runs.
"""
