"""Helpers that more than one test folder uses: runs of the training CLI, its one-line errors, W&B files.

What tests and benchmarks both use (ports, process trees, object-store servers) is in testbed/.
"""
