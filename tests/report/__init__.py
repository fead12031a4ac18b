"""Tests of dpframe.report (the notebook views and the report page), one file per module."""
