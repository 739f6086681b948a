"""Reading ``--config FILE``: one file for every command that takes one (``serve``, ``audit``).

The file is plain YAML (PyYAML's safe loader: the chart renders ``namespace: {{ .Release.Namespace }}``
unquoted, and a namespace named ``n`` must stay a string, which kubectl's typing of manifests would
make a boolean), checked whole by :func:`policies.config.parse_config`; every problem is one line
starting ``--config FILE:`` and naming the field. A test suite's ``config:`` goes through the same
check (:mod:`policies.testsuite`).
"""

from __future__ import annotations

import yaml

from policies.config import ConfigError, ConfigFile, parse_config


class ConfigFileError(Exception):
    """A config file that cannot be used (exit code 2); the message has one line per problem."""


def read_config(path: str | None) -> ConfigFile:
    """The config in ``path`` (the defaults when None)."""
    if path is None:
        return ConfigFile()
    try:
        with open(path, encoding="utf-8") as fh:
            docs = [d for d in yaml.safe_load_all(fh) if d is not None]
    except OSError as err:
        raise ConfigFileError(f"--config {path}: cannot read: {err.strerror}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise ConfigFileError(f"--config {path}: not valid YAML: {err}") from None
    if len(docs) > 1:
        raise ConfigFileError(f"--config {path}: holds {len(docs)} YAML documents; a config is one")
    try:
        return parse_config(docs[0] if docs else None)
    except ConfigError as err:
        raise ConfigFileError("\n".join(f"--config {path}: {line}" for line in err.problems)) from None
