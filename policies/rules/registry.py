"""The rules draguard runs, in the order their findings are reported.

Each rule is a module in this package; adding one means adding it here and giving it a section in
:class:`policies.config.RulesConfig`.
"""

from __future__ import annotations

from policies.rules.engine import Rule

RULES: tuple[Rule, ...] = ()
