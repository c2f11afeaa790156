"""The trainer: the `train` loop, its optimizer step, learning-rate schedule and distillation."""
