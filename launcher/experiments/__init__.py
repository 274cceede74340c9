"""Batch experiments: a matrix of benchmark runs, their results, and the report comparing them.

    spec.py      reads an experiment file (schema and matrix: mpijob.jobspec.experiment_matrix)
    runner.py    submits the runs one after another (or N at a time), records each one
    results.py   results.csv / results.jsonl / logs/ in the results directory
    aggregate.py groups the records: means over repetitions, scaling efficiency (pure)
    report.py    tables and PNG plots from a results directory
"""
