"""draguard's configuration: one mode per rule, exemptions, and each rule's parameters.

Pure data, validated with pydantic so a typo in the config file is an error that names the field
and the closest valid key (``rules.personas.admins.grups: unknown field; did you mean groups?``)
instead of a silently ignored key. One file serves every command (:class:`ConfigFile`, read by
:func:`parse_config`): the file the Helm chart renders holds the server's own sections too
(``logLevel``, ``tls``, ``certificates``), which ``draguard serve`` uses and ``audit`` and a test
suite check and leave alone.
The defaults are what draguard does with no config file at all, and they must be safe on a cluster
that has told draguard nothing: selectors and prescheduled enforce, personas only warn (a cluster
whose drivers draguard does not know must not have its drivers blocked), and the drain guard stays
off until a driver pod selector is configured. Sharing and quota enforce: with no config they only
hold devices to what upstream itself derives from their node-allocatable mappings.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from policies.cel import CELError, compile_expression
from policies.fileproblems import problem

Mode = Literal["enforce", "warn", "audit"]
FailurePolicy = Literal["Fail", "Ignore"]


class ConfigModel(BaseModel):
    """Strict: unknown keys are errors, so misspelled settings are caught at load time."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class RuleConfig(ConfigModel):
    """What every rule has: how findings are acted on, and where the rule does not apply.

    ``failure_policy`` says what to answer when the rule cannot decide (snapshot too old,
    deadline reached, an internal error): ``Fail`` denies, ``Ignore`` allows with a warning, just
    like a webhook configuration's failurePolicy.
    """

    mode: Mode = "enforce"
    failure_policy: FailurePolicy = "Ignore"
    exempt_namespaces: tuple[str, ...] = ()


class SelectorsConfig(RuleConfig):
    warn_no_match: bool = True
    warn_unknown_attributes: bool = True


class PrescheduledConfig(RuleConfig):
    # Mutating variant: rewrite spec.nodeName into a kubernetes.io/hostname node selector.
    mutate: bool = False


class Subjects(ConfigModel):
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()

    def include(self, username: str, groups: Iterable[str]) -> bool:
        """Whether a request's user is one of these subjects (by name or by any group)."""
        return username in self.users or not set(groups).isdisjoint(self.groups)

    def describe(self) -> str:
        """``users a, b; groups c`` for messages that say who may do something."""
        named = (("users", self.users), ("groups", self.groups))
        return "; ".join(f"{kind} {', '.join(names)}" for kind, names in named if names) or "nobody"


class DriverIdentity(ConfigModel):
    """A DRA driver and the identities allowed to publish its ResourceSlices."""

    driver: str
    # "namespace:name" of the driver's service accounts (system:serviceaccount:<ns>:<name>).
    service_accounts: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    # Node identities (system:node:<name>) may write slices of this driver for their own node.
    nodes: bool = False

    @field_validator("service_accounts")
    @classmethod
    def _namespace_and_name(cls, accounts: tuple[str, ...]) -> tuple[str, ...]:
        for account in accounts:
            namespace, _, name = account.partition(":")
            if not namespace or not name or ":" in name:
                raise ValueError(f"{account!r} must be <namespace>:<name>, e.g. gpu-driver:kubelet-plugin")
        return accounts

    def usernames(self) -> frozenset[str]:
        """The usernames the API server gives this driver's identities."""
        return frozenset(self.users) | {f"system:serviceaccount:{sa}" for sa in self.service_accounts}


class PersonasConfig(RuleConfig):
    mode: Mode = "warn"
    admins: Subjects = Field(default_factory=lambda: Subjects(groups=("system:masters",)))
    drivers: tuple[DriverIdentity, ...] = ()
    # May delete any ResourceSlice: the garbage collector removes the slices of a deleted Node (its
    # owner). Which username it has depends on kube-controller-manager's --use-service-account-credentials.
    slice_cleaners: Subjects = Field(
        default_factory=lambda: Subjects(
            users=(
                "system:kube-controller-manager",
                "system:serviceaccount:kube-system:generic-garbage-collector",
            )
        )
    )


class LabelSelector(ConfigModel):
    match_labels: dict[str, str] = Field(default_factory=dict)


class DrainConfig(RuleConfig):
    # None: the guard is inactive (draguard cannot tell driver pods apart).
    driver_pod_selector: LabelSelector | None = None

    @field_validator("driver_pod_selector")
    @classmethod
    def _selects_something_specific(cls, selector: LabelSelector | None) -> LabelSelector | None:
        # An empty selector matches every pod: workload pods would then block each other's eviction.
        if selector is not None and not selector.match_labels:
            raise ValueError("matchLabels must name the labels of the DRA driver pods, e.g. app: gpu-driver")
        return selector


SharingPolicy = Literal["None", "SamePod", "MultiPod"]


class SharingPolicyRule(ConfigModel):
    """Devices that get a sharing policy: all the set conditions must hold (driver, the class
    of the request that got the device, a CEL device selector); at least one must be set."""

    policy: SharingPolicy
    driver: str | None = None
    device_class_name: str | None = None
    selector: str | None = None

    @field_validator("selector")
    @classmethod
    def _compiles(cls, selector: str | None) -> str | None:
        if selector is not None:
            try:
                compile_expression(selector)
            except CELError as err:
                raise ValueError(f"the CEL device selector does not compile: {err}") from None
        return selector

    @model_validator(mode="after")
    def _selects_something(self) -> SharingPolicyRule:
        if self.driver is None and self.device_class_name is None and self.selector is None:
            raise ValueError("set driver, deviceClassName or selector to say which devices the entry is for")
        return self


class SharingConfig(RuleConfig):
    # Fail: a check that cannot decide must not let a second pod onto a device that forbids it (the
    # soak did so on a stale snapshot); a denied reservation is retried by the scheduler.
    failure_policy: FailurePolicy = "Fail"
    # First matching entry wins; a device attribute draguard.io/sharingPolicy wins over all of them.
    policies: tuple[SharingPolicyRule, ...] = ()


class QuotaConfig(RuleConfig):
    # Fail: when the shared ledger cannot be reached, admitting would let replicas overcommit the
    # quota unseen; a denied reservation is retried by the scheduler.
    failure_policy: FailurePolicy = "Fail"
    # How often the webhook heals the shared ledger from the snapshot: a charge whose release it
    # never saw (a claim deleted while no replica answered) holds quota until then. Charges written
    # less than 20 s before the snapshot was last current (webhook/ledger.py LANDING) are left alone.
    reconcile_seconds: float = Field(default=120.0, gt=0)


class RulesConfig(ConfigModel):
    selectors: SelectorsConfig = Field(default_factory=SelectorsConfig)
    prescheduled: PrescheduledConfig = Field(default_factory=PrescheduledConfig)
    personas: PersonasConfig = Field(default_factory=PersonasConfig)
    drain: DrainConfig = Field(default_factory=DrainConfig)
    sharing: SharingConfig = Field(default_factory=SharingConfig)
    quota: QuotaConfig = Field(default_factory=QuotaConfig)


class SnapshotConfig(ConfigModel):
    # Rules that need the cluster state answer per their failure policy when it is older than this.
    max_age_seconds: float = Field(default=300.0, gt=0)


class CELConfig(ConfigModel):
    engine: Literal["rust", "celpy"] = "rust"


class Config(ConfigModel):
    rules: RulesConfig = Field(default_factory=RulesConfig)
    snapshot: SnapshotConfig = Field(default_factory=SnapshotConfig)
    cel: CELConfig = Field(default_factory=CELConfig)


# --- the config file: the rules' settings and the server's own sections ----------------------------

LogLevel = Literal["debug", "info", "warning", "error"]
CertificatesMode = Literal["selfManaged", "certManager", "secret"]


class TLSConfig(ConfigModel):
    min_version: Literal["1.2", "1.3"] = "1.2"


class CertificatesConfig(ConfigModel):
    """The keys of the ``certificates`` section; what their values mean (durations, the key
    algorithm, what each mode needs) is ``certs.settings``' to check when ``draguard serve`` starts."""

    mode: CertificatesMode = "selfManaged"
    service: str | None = None
    namespace: str | None = None
    ca_secret_name: str | None = None
    tls_secret_name: str | None = None
    validating_webhook_configuration: str | None = None
    mutating_webhook_configuration: str | None = None
    lease_name: str | None = None
    ca_validity: str | None = None
    serving_validity: str | None = None
    renew_fraction: float | None = None
    renew_before: str | None = None
    overlap: str | None = None
    key_algorithm: str | None = None
    extra_hosts: tuple[str, ...] | None = None


class ConfigFile(Config):
    """The whole file, as the Helm chart renders it and every command reads it."""

    log_level: LogLevel = "info"
    tls: TLSConfig = Field(default_factory=TLSConfig)
    certificates: CertificatesConfig | None = None


class ConfigError(ValueError):
    """A config that cannot be used: one line per problem, each naming its field."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def parse_config(raw: Any) -> ConfigFile:
    """The config file's parsed YAML (None: an empty file) checked whole; :class:`ConfigError`
    lists every problem."""
    if raw is None:
        return ConfigFile()
    if not isinstance(raw, dict):
        raise ConfigError([f"<root>: must be a mapping of settings, got {type(raw).__name__}"])
    try:
        return ConfigFile.model_validate(raw)
    except ValidationError as err:
        lines = [problem(e, ConfigFile) for e in err.errors(include_url=False)]
        raise ConfigError(list(dict.fromkeys(lines))) from None
