"""The recovery policy, its log and sources, approvals, judge admissions and caps."""
