"""The rules draguard runs, in the order their findings are reported.

Each rule is a module in this package; adding one means adding it here and giving it a section in
:class:`policies.config.RulesConfig`. The two prescheduled rules share one section: the mutating one
only runs when ``prescheduled.mutate`` is set, and the validating one then leaves alone what the
mutating one rewrites.
"""

from __future__ import annotations

from policies.rules.drain import DrainRule
from policies.rules.engine import Rule
from policies.rules.personas import PersonasRule
from policies.rules.prescheduled import PrescheduledRewrite, PrescheduledRule
from policies.rules.quota import QuotaRule
from policies.rules.selectors import SelectorsRule
from policies.rules.sharing import SharingRule

RULES: tuple[Rule, ...] = (
    SelectorsRule(),
    PrescheduledRule(),
    PrescheduledRewrite(),
    PersonasRule(),
    DrainRule(),
    SharingRule(),
    QuotaRule(),
)
