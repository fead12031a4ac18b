"""Tests of dpframe.frames (the ``.dp`` namespaces, bins, results), one file per module."""
