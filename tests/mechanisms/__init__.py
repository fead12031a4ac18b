"""Tests of dpframe.mechanisms (noise, domains, scales, quantiles, selection), one file per module."""
