"""A component's inputs as its Args dataclass: trainstack/infra/config/loader.py from_inputs, under the name the GCP
parts still import (`args_from_inputs(args_type, value)`)."""

from trainstack.infra.config.loader import InputTypeError
from trainstack.infra.config.loader import from_inputs as args_from_inputs

__all__ = ["InputTypeError", "args_from_inputs"]
