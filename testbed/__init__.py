"""Local stand-ins that tests/ and bench/ share: free ports, process trees, object-store servers.

Not part of the installed package; both import it from the repository root (pytest's pythonpath,
`python -m bench.<name>`).
"""
