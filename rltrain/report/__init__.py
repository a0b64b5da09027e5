"""Aggregation across runs: `rltrain report <folder>` tables, `report.csv`, learning-curve PNGs.

`runs` finds and reads run folders, `stats` has the across-seed statistics (IQM, bootstrap
CIs), `table` the summaries, table and CSV, `plot` the PNGs, `cli` the command.
"""
