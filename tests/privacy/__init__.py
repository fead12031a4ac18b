"""Cross-cutting privacy tests: neighbouring data sets through every route (the boundary)."""
