"""Benchmarks: each prints JSON and compares against a named peer in the same run."""
