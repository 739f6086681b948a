"""Subcommands of the ``draguard`` CLI, one module each (see :mod:`webhook.cli`)."""
