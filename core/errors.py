"""The errors a user can cause, shared by every package and every command line.

A `UserError` is something the person running the command can fix (a config key, an input path,
an output folder made by another config). Every CLI reports one as `error: <message>` with exit
status 2 before any Spark job or process group starts (core/cli.py); anything else is a bug or a
failure of the machine and keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """Base of the errors a user fixes by changing the command, the config or the input."""


class ConfigError(UserError, ValueError):
    """A config file, override or value is invalid; the message names the file and the key."""


class InputError(UserError, ValueError):
    """The inputs cannot be resolved or read (missing, empty, wrong columns); raised before work starts."""


class OutputConflict(UserError, RuntimeError):
    """The output folder was made by another job, config or input list; it is never mixed into."""
