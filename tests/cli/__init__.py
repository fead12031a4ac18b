"""Tests of dpframe.cli (the command line), one file per module."""
