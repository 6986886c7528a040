"""Performance benchmarks: ``rounds`` (every workload's round time, compile time
and memory -> benchmarks/results.md), ``fractional`` (overhead of the
fractional-order methods -> benchmarks/fractional.md) and ``sweep`` (points per
hour of ``fedfrac.sweep`` vs one process per point -> its own section of
benchmarks/results.md and benchmarks/sweep.json).

Command line: ``fedfrac-bench [flags]`` runs ``rounds``;
``fedfrac-bench fractional [flags]`` runs ``fractional``, ``fedfrac-bench sweep
[flags]`` runs ``sweep`` (also
``python -m fedfrac_lab.bench ...``).
"""
