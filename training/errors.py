"""The one exception type that reaches the user as a single line (what is wrong, how to fix it)."""


class UserError(Exception):
    """Bad input: printed as one line by the CLI, never as a traceback."""
