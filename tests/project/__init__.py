"""Tests of the repository as a whole: import layers, the suite itself, examples, benchmarks, docs."""
