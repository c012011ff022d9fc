"""Errors of the core, in a module of their own so that options and policies both use them
without importing each other."""


class OptionError(ValueError):
    """A fairness option has a value that cannot be used."""
