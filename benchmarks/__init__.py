"""dpframe benchmarks: DP statistics against the native engines and the peer libraries.

Run ``python -m benchmarks --help``. Every measurement runs in its own subprocess
(:mod:`benchmarks.worker`), with a warm-up and the median of at least five repeats; the
results go to ``benchmarks/reports/RESULTS-harness.md``. See ``benchmarks/README.md``.
"""
