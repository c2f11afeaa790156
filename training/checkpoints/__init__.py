"""Checkpoints: local save and resume, the background writer, and the object-store mirror (snapshots)."""
