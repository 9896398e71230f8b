"""The one exception type that bad input raises, everywhere in costmodel."""


class CostModelError(ValueError):
    """Bad input: a scenario key, a config field, a file. The message is one line that names
    the field, the value and what is allowed; the CLI prints it and exits with status 2."""
