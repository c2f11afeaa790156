"""Outputs whose value a part knew when it made them: trainstack/infra/config/known_outputs.py (the loader takes them)."""

from trainstack.infra.config.known_outputs import is_known, known, known_output

__all__ = ["is_known", "known", "known_output"]
