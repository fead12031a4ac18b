"""Tests of dpframe.backends (the engines dpframe runs on), one file per module."""
