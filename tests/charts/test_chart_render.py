"""The chart as ``helm install`` renders it: schemas, lint, and the template logic that matters."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import celpy
import pytest
import yaml
from helm_render import (
    CHART,
    NAMESPACE,
    HelmError,
    deadline_args,
    helm_sdkpy,
    needs_helm,
    render,
    require_helm,
    uninstall_deletes,
)
from pydantic import BaseModel

from certs.settings import CertSettings
from policies.config import Config, RulesConfig
from policies.rules.registry import RULES
from webhook.commands.audit import load_config as audit_config
from webhook.commands.serve import load_config
from webhook.server import split_rules
from webhook.state import RESOURCES as STATE_RESOURCES

Find = Callable[[list[dict[str, Any]], str, str | None], dict[str, Any]]
BUILTIN_GROUPS = (
    "",
    "apps",
    "policy",
    "rbac.authorization.k8s.io",
    "admissionregistration.k8s.io",
    "networking.k8s.io",
)
RULE_GROUPS = ["selectors", "prescheduled", "personas", "drain", "sharing", "quota"]
# The personas rule's Namespace half has a webhook of its own (see its test).
NAMESPACE_GUARD = "namespaces.personas.draguard.io"
# Every validating webhook and the rule it asks (its path is /validate/<rule>).
WEBHOOK_RULES = {**{f"{g}.draguard.io": g for g in RULE_GROUPS}, NAMESPACE_GUARD: "personas"}
ADMIN_ACCESS = "resource.kubernetes.io/admin-access"

try:
    import kubernetes_validate
except ImportError:  # pragma: no cover - depends on the environment
    kubernetes_validate = None

needs_schemas = pytest.mark.skipif(
    kubernetes_validate is None,
    reason="kubernetes-validate is not installed (pip install kubernetes-validate): no offline schemas",
)
pytestmark = needs_helm


def validate(obj: dict[str, Any], version: str) -> None:
    assert kubernetes_validate is not None
    kubernetes_validate.validate(obj, version, strict=True)


def group_of(obj: dict[str, Any]) -> str:
    return obj["apiVersion"].rpartition("/")[0]


def webhooks(
    objects: list[dict[str, Any]], find: Find, kind: str = "ValidatingWebhookConfiguration"
) -> dict[str, Any]:
    return {w["name"]: w for w in find(objects, kind, "draguard")["webhooks"]}


# -- lint and schemas --------------------------------------------------------------------------


def lint(chart: str) -> dict[str, Any]:
    require_helm()
    result: dict[str, Any] = asyncio.run(
        helm_sdkpy.Lint(helm_sdkpy.Configuration(namespace=NAMESPACE)).run(chart)
    )
    return result


def test_helm_lint_passes() -> None:
    result = lint(CHART)
    assert result["TotalChartsLinted"] == 1
    # Severity 2 is a warning, 3 an error (helm's support.Severity); info (1) is allowed.
    assert [m for m in result["Messages"] if m["Severity"] >= 2] == []


def test_helm_lint_can_fail(tmp_path: Path) -> None:
    """The lint gate is real: a template error is reported."""
    broken = tmp_path / "draguard"
    shutil.copytree(CHART, broken)
    (broken / "templates" / "broken.yaml").write_text("kind: {{ .Values.nope.deeper }}\n")
    assert any(
        m["Severity"] == 3 and m["Path"].startswith("templates") for m in lint(str(broken))["Messages"]
    )


@needs_schemas
@pytest.mark.parametrize("version", ["1.34.0", "1.35.0", "1.36.0", "1.37.0"])
def test_every_default_manifest_is_valid_against_kubernetes_schemas(
    default_objects: list[dict[str, Any]], version: str
) -> None:
    assert default_objects
    for obj in default_objects:
        assert group_of(obj) in BUILTIN_GROUPS, f"default values must not need CRDs, got {obj['kind']}"
        validate(obj, version)


@needs_schemas
def test_optional_manifests_are_valid_too(find: Find) -> None:
    peers = [{"ipBlock": {"cidr": "10.0.0.0/8"}}]
    values = {
        "networkPolicy": {"enabled": True, "webhookFrom": peers},
        "webhooks": {
            "prescheduled": {"mutating": {"enabled": True}},
            "namespaceSelector": {
                "matchLabels": {"draguard.io/rollout": "test"},
                "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["system"]}],
            },
        },
    }
    objects = render(values)
    for obj in objects:
        validate(obj, "1.34.0")
    # Each optional manifest is there and does its job, not merely valid when it is empty.
    assert find(objects, "MutatingWebhookConfiguration", "draguard")["webhooks"]
    policy = find(objects, "NetworkPolicy", "draguard")["spec"]
    pod_labels = find(objects, "Deployment", "draguard")["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert policy["policyTypes"] == ["Ingress"]
    ports = {r["ports"][0]["port"]: r.get("from") for r in policy["ingress"]}
    assert ports == {8443: peers, 8080: None, 8081: None}


# -- deployment shape --------------------------------------------------------------------------


def test_deployment_is_highly_available_and_hardened(
    default_objects: list[dict[str, Any]], find: Find
) -> None:
    deployment = find(default_objects, "Deployment", "draguard")
    spec, pod = deployment["spec"], deployment["spec"]["template"]["spec"]
    assert spec["replicas"] == 3
    assert spec["strategy"]["type"] == "RollingUpdate"
    assert pod["priorityClassName"] == "system-cluster-critical"
    term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0][
        "podAffinityTerm"
    ]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
    (container,) = pod["containers"]
    assert "cpu" in container["resources"]["requests"]
    assert "cpu" not in container["resources"].get("limits", {})
    security = container["securityContext"]
    assert security["runAsNonRoot"] is True and pod["securityContext"]["runAsNonRoot"] is True
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert security["seccompProfile"]["type"] == "RuntimeDefault"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"https": 8443, "metrics": 8080, "health": 8081}
    # Plain HTTP on the health port: alive before the first certificate is served.
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        assert (get["path"], get["port"], get["scheme"]) == (path, "health", "HTTP")
    # Serving goes on while the pod leaves the Service's endpoints (the kubelet's sleep, no binary).
    assert container["lifecycle"]["preStop"] == {"sleep": {"seconds": 5}}
    assert pod.get("terminationGracePeriodSeconds", 30) > 5
    assert container["args"][:1] == ["serve"]
    assert "--port=8443" in container["args"] and "--metrics-port=8080" in container["args"]
    assert "--health-port=8081" in container["args"]
    assert "--cert-dir=/etc/draguard/tls" in container["args"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/etc/draguard/tls"]]["secret"] == {"secretName": "draguard-tls", "optional": True}
    assert "emptyDir" in volumes[mounts["/tmp"]]  # read-only root: Python still needs a writable /tmp


def deadlines(objects: list[dict[str, Any]]) -> dict[str, float]:
    """serve's --deadline arguments: path -> seconds, "" for the default."""
    given = [a.removeprefix("--deadline=") for a in deadline_args(objects)]
    return {path: float(seconds) for path, _, seconds in (g.rpartition("=") for g in given)}


@pytest.mark.parametrize(
    ("webhooks_values", "expected"),
    [
        ({}, 4.0),  # draguard's own default for the chart's 5 s
        ({"quota": {"timeoutSeconds": 2}}, 1.6),
        ({"drain": {"timeoutSeconds": 3}}, 2.4),
        ({"drain": {"enabled": False, "timeoutSeconds": 1}}, 4.0),  # a disabled webhook waits for nothing
        ({"prescheduled": {"mutating": {"enabled": True, "timeoutSeconds": 1}}}, 0.8),
        ({g: {"timeoutSeconds": 30} for g in RULE_GROUPS}, 24.0),
    ],
)
def test_draguard_answers_before_the_api_server_gives_up(
    webhooks_values: dict[str, Any], expected: float
) -> None:
    """draguard answers per the rules' failurePolicy after --deadline; past a webhook's timeoutSeconds
    the API server applies the webhook's instead, so the deadline follows the shortest timeout."""
    assert deadlines(render({"webhooks": webhooks_values}))[""] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("webhooks_values", "expected"),
    [
        ({}, {"validate/quota": 8.0, "validate/sharing": 4.0, "validate/drain": 4.0}),
        ({"quota": {"timeoutSeconds": 2}}, {"validate/quota": 1.6, "validate/selectors": 4.0}),
        ({"drain": {"enabled": False, "timeoutSeconds": 1}}, {"validate/drain": None}),
        (
            {"prescheduled": {"mutating": {"enabled": True, "timeoutSeconds": 1}}},
            {"mutate/prescheduled": 0.8},
        ),
        ({}, {"mutate/prescheduled": None}),  # the mutating webhook is off by default
    ],
)
def test_each_webhook_path_gets_80_percent_of_its_own_timeout(
    webhooks_values: dict[str, Any], expected: dict[str, float | None]
) -> None:
    """A webhook given a longer timeoutSeconds (the quota rule's, which writes its ledger through
    the API server) gets a longer deadline; the others keep theirs (issue 30)."""
    given = deadlines(render({"webhooks": webhooks_values}))
    assert {path: given.get(path) for path in expected} == expected


def test_pdb_keeps_one_replica_and_selects_the_pods(
    default_objects: list[dict[str, Any]], find: Find
) -> None:
    pdb = find(default_objects, "PodDisruptionBudget", "draguard")
    deployment = find(default_objects, "Deployment", "draguard")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


def test_service_routes_443_to_the_https_port(default_objects: list[dict[str, Any]], find: Find) -> None:
    ports = {p["name"]: p for p in find(default_objects, "Service", "draguard")["spec"]["ports"]}
    assert (ports["https"]["port"], ports["https"]["targetPort"]) == (443, "https")
    assert ports["metrics"]["targetPort"] == "metrics"


# -- webhooks ----------------------------------------------------------------------------------


def rules_of(hook: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, operation)
        for rule in hook["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for operation in rule["operations"]
    }


def test_one_webhook_per_rule_group_with_the_issue_rules(
    default_objects: list[dict[str, Any]], find: Find
) -> None:
    hooks = webhooks(default_objects, find)
    assert sorted(hooks) == sorted(WEBHOOK_RULES)
    dra = "resource.k8s.io"
    assert rules_of(hooks["selectors.draguard.io"]) == {
        (dra, r, op)
        for r in ("deviceclasses", "resourceclaims", "resourceclaimtemplates")
        for op in ("CREATE", "UPDATE")
    }
    assert rules_of(hooks["prescheduled.draguard.io"]) == {("", "pods", "CREATE")}
    assert rules_of(hooks["personas.draguard.io"]) == {
        (dra, r, op) for r in ("deviceclasses", "resourceslices") for op in ("CREATE", "UPDATE", "DELETE")
    }
    # A namespace created with the label, too.
    assert rules_of(hooks[NAMESPACE_GUARD]) == {("", "namespaces", "CREATE"), ("", "namespaces", "UPDATE")}
    assert rules_of(hooks["drain.draguard.io"]) == {("", "pods/eviction", "CREATE")}
    both = {("", "pods", "CREATE"), (dra, "resourceclaims/status", "UPDATE")}
    assert rules_of(hooks["sharing.draguard.io"]) == both
    # The quota rule releases a claim's ledger charge when the claim is deleted.
    assert rules_of(hooks["quota.draguard.io"]) == both | {(dra, "resourceclaims", "DELETE")}


def test_webhook_common_fields(default_objects: list[dict[str, Any]], find: Find) -> None:
    for name, hook in webhooks(default_objects, find).items():
        assert hook["admissionReviewVersions"] == ["v1"], name
        # the quota rule writes its ledger through the API server: the API server's own default
        assert hook["timeoutSeconds"] == (10 if name == "quota.draguard.io" else 5), name
        assert hook["matchPolicy"] == "Equivalent", name
        assert hook["clientConfig"]["service"] == {
            "name": "draguard",
            "namespace": NAMESPACE,
            "path": f"/validate/{WEBHOOK_RULES[name]}",
            "port": 443,
        }, name
        # selfManaged: the elected replica injects it; the chart must not own (and reset) it.
        assert "caBundle" not in hook["clientConfig"], name
        expected = "NoneOnDryRun" if name == "quota.draguard.io" else "None"
        assert hook["sideEffects"] == expected, name
        if name == NAMESPACE_GUARD:
            continue  # its selector has a test of its own
        expressions = hook["namespaceSelector"]["matchExpressions"]
        excluded = next(e for e in expressions if e["key"] == "kubernetes.io/metadata.name")
        assert excluded["operator"] == "NotIn" and set(excluded["values"]) >= {"kube-system", NAMESPACE}
        assert {"key": "draguard.io/ignore", "operator": "DoesNotExist"} in expressions


def test_default_failure_policies(default_objects: list[dict[str, Any]], find: Find) -> None:
    policies = {n: h["failurePolicy"] for n, h in webhooks(default_objects, find).items()}
    values = yaml.safe_load(Path(CHART, "values.yaml").read_text())["webhooks"]
    assert policies == {n: values[rule]["failurePolicy"] for n, rule in WEBHOOK_RULES.items()}
    assert policies["drain.draguard.io"] == "Ignore"  # a down webhook must not stop node drains


def test_each_webhook_asks_only_its_own_rule(default_objects: list[dict[str, Any]], find: Find) -> None:
    """Plain /validate runs every validating rule: a pod CREATE sent there by three webhooks would
    be decided three times, and a group's failurePolicy or enabled switch would not isolate its rule."""
    paths = {n: h["clientConfig"]["service"]["path"] for n, h in webhooks(default_objects, find).items()}
    assert paths == {n: f"/validate/{rule}" for n, rule in WEBHOOK_RULES.items()}
    objects = render({"webhooks": {"prescheduled": {"mutating": {"enabled": True}}}})
    (hook,) = find(objects, "MutatingWebhookConfiguration", "draguard")["webhooks"]
    assert hook["clientConfig"]["service"]["path"] == "/mutate/prescheduled"


def test_webhook_paths_are_served_by_draguard(default_objects: list[dict[str, Any]], find: Find) -> None:
    """Every path the chart posts to is one draguard's server routes (not a 404, which the API
    server would treat as a webhook failure)."""
    served = split_rules(RULES)
    objects = render({"webhooks": {"prescheduled": {"mutating": {"enabled": True}}}})
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for hook in find(objects, kind, "draguard")["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            assert path.lstrip("/") in served, (hook["name"], path)
            (rule,) = served[path.lstrip("/")]
            assert rule.mutating == (kind == "MutatingWebhookConfiguration"), path


def test_an_outside_draguard_is_called_by_url_and_its_certificate_names_the_host(find: Find) -> None:
    """webhooks.url (development, the end-to-end tests) replaces every Service reference with the
    URL of the same path, and selfManaged certificates then name the URL's host."""
    objects = render(
        {"webhooks": {"url": "https://127.0.0.1:9443/", "prescheduled": {"mutating": {"enabled": True}}}}
    )
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for hook in find(objects, kind, "draguard")["webhooks"]:
            config = hook["clientConfig"]
            assert "service" not in config, hook["name"]
            assert re.fullmatch(r"https://127\.0\.0\.1:9443/(validate|mutate)/[a-z]+", config["url"]), config
    settings = yaml.safe_load(find(objects, "ConfigMap", "draguard-config")["data"]["config.yaml"])
    assert "127.0.0.1" in CertSettings.from_mapping(settings["certificates"]).policy.hosts
    with pytest.raises(HelmError, match="url"):
        render({"webhooks": {"url": "http://127.0.0.1:9443"}})


def test_failure_policy_and_enablement_are_per_webhook(find: Find) -> None:
    objects = render({"webhooks": {"quota": {"failurePolicy": "Ignore"}, "drain": {"enabled": False}}})
    hooks = webhooks(objects, find)
    assert hooks["quota.draguard.io"]["failurePolicy"] == "Ignore"
    assert hooks["sharing.draguard.io"]["failurePolicy"] == "Fail"
    assert "drain.draguard.io" not in hooks


def test_extra_excluded_namespaces(find: Find) -> None:
    objects = render({"excludedNamespaces": ["gpu-operator"]})
    for name, hook in webhooks(objects, find).items():
        excluded = hook["namespaceSelector"]["matchExpressions"][0]["values"]
        if name == NAMESPACE_GUARD:  # see test_the_namespace_guard_cannot_be_opted_out_of
            assert excluded == [NAMESPACE]
        else:
            assert excluded == ["kube-system", NAMESPACE, "gpu-operator"]


def selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A label selector as the API server evaluates it; no selector selects everything."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for term in selector.get("matchExpressions") or []:
        key, values = term["key"], term.get("values") or []
        present = key in labels
        matches = {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }[term["operator"]]
        if not matches:
            return False
    return True


def namespace_labels(name: str, **labels: str) -> dict[str, str]:
    """A Namespace's labels: the API server always sets kubernetes.io/metadata.name to its name."""
    return {"kubernetes.io/metadata.name": name, **labels}


def test_the_namespace_guard_cannot_be_opted_out_of(find: Find) -> None:
    """For a Namespace object the API server matches namespaceSelector against the namespace's own
    new labels: an opt-out label added in the same update as the admin-access label would skip the
    check. The webhooks that guard Namespaces ignore it (and excludedNamespaces), excluding only
    draguard's own namespace, whose name label nobody can forge."""
    objects = render({"excludedNamespaces": ["gpu-operator"]})
    sneaky = {"draguard.io/ignore": "true", ADMIN_ACCESS: "true"}
    guards = [h for h in webhooks(objects, find).values() if ("", "namespaces", "UPDATE") in rules_of(h)]
    assert [h["name"] for h in guards] == [NAMESPACE_GUARD]
    (guard,) = guards
    for name in ("team-a", "kube-system", "gpu-operator"):
        assert selects(guard.get("namespaceSelector"), namespace_labels(name, **sneaky)), name
    assert not selects(guard.get("namespaceSelector"), namespace_labels(NAMESPACE, **sneaky))
    assert guard["failurePolicy"] == "Fail" and guard["timeoutSeconds"] == 5
    # The opt-out label still works for the objects in a namespace (the other webhooks).
    others = [h for h in webhooks(objects, find).values() if h is not guard]
    assert all(not selects(h["namespaceSelector"], namespace_labels("team-a", **sneaky)) for h in others)


@pytest.mark.parametrize(
    "narrow",
    [
        {"matchLabels": {"draguard.io/rollout": "test"}},
        {"matchExpressions": [{"key": "draguard.io/rollout", "operator": "In", "values": ["test"]}]},
    ],
)
def test_a_rollout_can_start_with_a_few_namespaces(find: Find, narrow: dict[str, Any]) -> None:
    """The staged rollout (conventions, README "Rolling out safely"): a selector that narrows what
    the webhooks see, on top of the exclusions, e.g. to namespaces labelled for the test."""
    hooks = webhooks(render({"webhooks": {"namespaceSelector": narrow}}), find)
    testing = namespace_labels("team-a", **{"draguard.io/rollout": "test"})
    for name, hook in hooks.items():
        selector = hook["namespaceSelector"]
        if name == NAMESPACE_GUARD:
            # For a Namespace the labels are its own: narrowing the guard would let anyone skip it.
            assert selects(selector, namespace_labels("team-b", **{ADMIN_ACCESS: "true"})), name
            continue
        assert selects(selector, testing), name
        assert not selects(selector, namespace_labels("team-b")), name
        # The exclusions still apply.
        assert not selects(selector, {**testing, "draguard.io/ignore": "true"}), name
        assert not selects(selector, {**testing, "kubernetes.io/metadata.name": "kube-system"}), name


def test_the_namespace_guard_follows_the_personas_switches(find: Find) -> None:
    personas = {"failurePolicy": "Ignore", "timeoutSeconds": 3}
    guard = webhooks(render({"webhooks": {"personas": personas}}), find)[NAMESPACE_GUARD]
    assert (guard["failurePolicy"], guard["timeoutSeconds"]) == ("Ignore", 3)
    hooks = webhooks(render({"webhooks": {"personas": {"enabled": False}}}), find)
    assert NAMESPACE_GUARD not in hooks and "personas.draguard.io" not in hooks


def test_only_admin_access_label_changes_reach_the_namespace_guard(
    default_objects: list[dict[str, Any]], find: Find
) -> None:
    """The guard sees every namespace, kube-system included: its matchCondition (CEL, evaluated by
    the API server) keeps ordinary namespace writes from depending on draguard being up."""
    (condition,) = webhooks(default_objects, find)[NAMESPACE_GUARD]["matchConditions"]
    env = celpy.Environment()
    program = env.program(env.compile(condition["expression"]))

    def sent(operation: str, new: dict[str, str] | None, old: dict[str, str] | None = None) -> bool:
        def namespace(labels: dict[str, str] | None) -> dict[str, Any]:
            meta: dict[str, Any] = {"name": "team-a"}
            if labels is not None:
                meta["labels"] = labels
            return {"metadata": meta}

        resource = {"group": "", "version": "v1", "resource": "namespaces"}
        request = {"operation": operation, "resource": resource}
        activation = {
            "request": celpy.json_to_cel(request),
            "object": celpy.json_to_cel(namespace(new)),
            "oldObject": celpy.json_to_cel(namespace(old) if operation == "UPDATE" else None),
        }
        return bool(program.evaluate(activation))

    on, other = {ADMIN_ACCESS: "true"}, {"team": "a"}
    assert sent("CREATE", on) and sent("CREATE", {ADMIN_ACCESS: ""})
    assert not sent("CREATE", other) and not sent("CREATE", None)
    assert sent("UPDATE", on, other) and sent("UPDATE", on, None)  # set
    assert sent("UPDATE", other, on) and sent("UPDATE", None, on)  # removed
    assert sent("UPDATE", {ADMIN_ACCESS: "false"}, on)  # changed
    assert not sent("UPDATE", {**on, **other}, on)  # unchanged
    assert not sent("UPDATE", other, None) and not sent("UPDATE", None, None)


def pod_filter(hook: dict[str, Any]) -> celpy.Runner | None:
    conditions = hook.get("matchConditions") or []
    if not conditions:
        return None
    (condition,) = conditions
    env = celpy.Environment()
    return env.program(env.compile(condition["expression"]))


def admitted(
    program: celpy.Runner, resource: str, obj: dict[str, Any] | None, group: str = "", sub: str = ""
) -> bool:
    """``obj`` None: a DELETE, for which the API server passes a null object. Like the API server,
    ``request`` has no ``subResource`` when there is none (it converts the request without its
    empty fields), so an expression reading it unguarded fails here as it does there."""
    request: dict[str, Any] = {"resource": {"group": group, "version": "v1", "resource": resource}}
    if sub:
        request["subResource"] = sub
    return bool(program.evaluate({"request": celpy.json_to_cel(request), "object": celpy.json_to_cel(obj)}))


def test_pods_without_resource_claims_never_reach_draguard(
    default_objects: list[dict[str, Any]], find: Find
) -> None:
    """The matchConditions, evaluated as CEL: ordinary pods are filtered out in the API server."""
    plain = {"spec": {"containers": [{"name": "c"}]}}
    empty = {"spec": {"containers": [{"name": "c"}], "resourceClaims": []}}
    with_claims = {"spec": {"containers": [{"name": "c"}], "resourceClaims": [{"name": "gpu"}]}}
    claim = {"spec": {}, "status": {}}
    hooks = webhooks(default_objects, find)
    for name in ("prescheduled.draguard.io", "sharing.draguard.io", "quota.draguard.io"):
        program = pod_filter(hooks[name])
        assert program is not None, f"{name} has pods among its rules and needs the filter"
        assert not admitted(program, "pods", plain)
        assert not admitted(program, "pods", empty)
        assert admitted(program, "pods", with_claims)
        assert admitted(program, "resourceclaims", claim, group="resource.k8s.io", sub="status")
        assert admitted(program, "resourceclaims", None, group="resource.k8s.io")  # DELETE
    for name in ("selectors.draguard.io", "personas.draguard.io", "drain.draguard.io"):
        assert pod_filter(hooks[name]) is None, f"{name} must not filter: its objects are not pods"


def test_mutating_variant_when_enabled(find: Find) -> None:
    objects = render({"webhooks": {"prescheduled": {"mutating": {"enabled": True}}}})
    (hook,) = find(objects, "MutatingWebhookConfiguration", "draguard")["webhooks"]
    assert hook["name"] == "prescheduled.draguard.io"
    assert hook["clientConfig"]["service"]["path"] == "/mutate/prescheduled"
    assert hook["failurePolicy"] == "Ignore"
    assert hook["reinvocationPolicy"] == "Never"
    assert pod_filter(hook) is not None


def test_uninstall_removes_the_webhook_configurations_before_what_serves_them() -> None:
    """What the conventions' pre-delete hook is for: an uninstall must never leave a Fail webhook
    pointing at nothing. The chart owns its webhook configurations and Helm deletes them first
    (validating, then mutating), before the Service and the Deployment; this keeps it that way (a
    helm.sh/resource-policy: keep, or configurations made outside the chart, would need a hook)."""
    deletes = uninstall_deletes({"webhooks": {"prescheduled": {"mutating": {"enabled": True}}}})
    assert deletes[:2] == [
        ("validatingwebhookconfigurations", "draguard"),
        ("mutatingwebhookconfigurations", "draguard"),
    ]
    assert ("deployments", "draguard") in deletes and ("services", "draguard") in deletes


def test_no_mutating_configuration_by_default(default_objects: list[dict[str, Any]]) -> None:
    assert not [o for o in default_objects if o["kind"] == "MutatingWebhookConfiguration"]


# -- RBAC --------------------------------------------------------------------------------------

WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}


def rbac_rules(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rules draguard itself is granted (every role the chart binds to its ServiceAccount)."""
    bound = {
        (o["roleRef"]["kind"], o["roleRef"]["name"])
        for o in objects
        if o["kind"] in ("ClusterRoleBinding", "RoleBinding")
        and any(s["kind"] == "ServiceAccount" and s["name"] == "draguard" for s in o["subjects"])
    }
    return [rule for o in objects if (o["kind"], o["metadata"]["name"]) in bound for rule in o["rules"]]


def grants(objects: list[dict[str, Any]], group: str, resource: str, verb: str) -> list[dict[str, Any]]:
    return [
        r
        for r in rbac_rules(objects)
        if group in r["apiGroups"]
        and resource in r["resources"]
        and (verb in r["verbs"] or "*" in r["verbs"])
    ]


def test_reads_are_exactly_the_snapshot_sources(default_objects: list[dict[str, Any]], find: Find) -> None:
    read = find(default_objects, "ClusterRole", "draguard-read")
    assert {v for r in read["rules"] for v in r["verbs"]} == {"get", "list", "watch"}
    resources = {(g, res) for r in read["rules"] for g in r["apiGroups"] for res in r["resources"]}
    # What the state lists and watches (webhook/state.py), whatever the version it asks for.
    assert resources == {(r.api_version.rpartition("/")[0], r.plural) for r in STATE_RESOURCES}
    assert ("scheduling.k8s.io", "priorityclasses") in resources


def test_writes_are_limited_to_named_objects_where_rbac_allows(default_objects: list[dict[str, Any]]) -> None:
    for rule in rbac_rules(default_objects):
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
        if set(rule["verbs"]) & {"update", "patch", "delete"}:
            assert rule.get("resourceNames"), f"unrestricted write: {rule}"
        if "create" in rule["verbs"]:  # create cannot be limited by name; keep it to what we create
            reviews = {"tokenreviews", "subjectaccessreviews"}
            assert set(rule["resources"]) <= {"configmaps", "leases", "secrets", *reviews}, rule
    assert [r["resourceNames"] for r in grants(default_objects, "", "configmaps", "update")] == [
        ["draguard-quota-ledger"]
    ]
    assert [
        r["resourceNames"]
        for r in grants(
            default_objects, "admissionregistration.k8s.io", "validatingwebhookconfigurations", "update"
        )
    ] == [["draguard"]]
    assert [
        r["resourceNames"] for r in grants(default_objects, "coordination.k8s.io", "leases", "update")
    ] == [["draguard-certs"]]
    assert [sorted(r["resourceNames"]) for r in grants(default_objects, "", "secrets", "update")] == [
        ["draguard-ca", "draguard-tls"]
    ]
    assert grants(default_objects, "authentication.k8s.io", "tokenreviews", "create")
    assert grants(default_objects, "authorization.k8s.io", "subjectaccessreviews", "create")
    assert not grants(default_objects, "resource.k8s.io", "resourceclaims", "update")
    assert not grants(default_objects, "", "pods", "delete")


def test_the_dry_run_role_grants_only_the_endpoint_and_is_bound_to_nobody(
    default_objects: list[dict[str, Any]], find: Find
) -> None:
    role = find(default_objects, "ClusterRole", "draguard-dryrun")
    # The verb of a POST to a non-resource URL is "post" (apiserver endpoints/request/requestinfo.go).
    assert role["rules"] == [{"nonResourceURLs": ["/v1/dryrun"], "verbs": ["post"]}]
    refs = [o["roleRef"]["name"] for o in default_objects if o["kind"].endswith("RoleBinding")]
    assert "draguard-dryrun" not in refs
    assert role["rules"][0] not in rbac_rules(default_objects)


def test_the_reader_role_grants_get_and_list_of_what_the_commands_read_and_is_bound_to_nobody(
    default_objects: list[dict[str, Any]], find: Find
) -> None:
    role = find(default_objects, "ClusterRole", "draguard-reader")
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    wanted = {
        (r.api_version.rpartition("/")[0], r.plural, verb)
        for r in STATE_RESOURCES
        for verb in ("get", "list")
    }
    assert granted == wanted
    refs = [o["roleRef"]["name"] for o in default_objects if o["kind"].endswith("RoleBinding")]
    assert "draguard-reader" not in refs


@pytest.mark.parametrize(
    ("release", "values", "name"),
    [
        ("draguard", {}, "draguard-reader"),
        ("prod", {}, "prod-draguard-reader"),
        ("prod", {"fullnameOverride": "gpu-guard"}, "gpu-guard-reader"),
    ],
)
def test_the_forbidden_error_finds_the_reader_role_whatever_the_release(
    release: str, values: dict[str, Any], name: str
) -> None:
    """The one-line error of a forbidden read names a label selector, since the role's name follows
    the release: in every rendering it selects exactly the reader role."""
    from webhook.cluster import READER_LABEL

    key, _, value = READER_LABEL.partition("=")
    objects = render(values, release=release)
    selected = [
        o["metadata"]["name"]
        for o in objects
        if o["kind"] == "ClusterRole" and o["metadata"].get("labels", {}).get(key) == value
    ]
    assert selected == [name]


def test_secrets_and_leases_are_only_writable_in_our_namespace(default_objects: list[dict[str, Any]]) -> None:
    for obj in default_objects:
        if obj["kind"] == "ClusterRole":
            for rule in obj["rules"]:
                assert not {"secrets", "leases"} & set(rule.get("resources", ())), rule
    role = next(o for o in default_objects if o["kind"] == "Role")
    assert role["metadata"]["namespace"] == NAMESPACE


# -- TLS modes ---------------------------------------------------------------------------------


def hours(duration: str) -> float:
    """A Go duration of hours, minutes and seconds (the only units the chart's schema allows)."""
    match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", duration)
    assert match and duration, duration
    h, m, sec = (int(g or 0) for g in match.groups())
    return h + m / 60 + sec / 3600


def issuer_chain(objects: list[dict[str, Any]], certificate: dict[str, Any]) -> list[dict[str, Any]]:
    """The Certificates from ``certificate`` up to its root, following issuerRefs as cert-manager
    does: a CA Issuer signs with the key in its Secret, which a Certificate of ours writes; the chain
    ends at a certificate issued by a selfSigned Issuer (or by an issuer the chart does not own)."""
    chain = [certificate]
    while True:
        ref = chain[-1]["spec"]["issuerRef"]
        kind, name = ref.get("kind", "Issuer"), ref["name"]
        issuers = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
        if not issuers or "selfSigned" in issuers[0]["spec"]:
            return chain
        secret = issuers[0]["spec"]["ca"]["secretName"]
        (signer,) = [o for o in objects if o["kind"] == "Certificate" and o["spec"]["secretName"] == secret]
        assert signer not in chain, "issuer loop"
        chain.append(signer)


def test_cert_manager_mode(find: Find) -> None:
    mutating = {"prescheduled": {"mutating": {"enabled": True}}}
    objects = render({"tls": {"mode": "certManager"}, "webhooks": mutating})
    certificate = find(objects, "Certificate", "draguard-serving")
    assert certificate["spec"]["dnsNames"] == [
        f"draguard.{NAMESPACE}.svc",
        f"draguard.{NAMESPACE}.svc.cluster.local",
    ]
    assert certificate["spec"]["secretName"] == "draguard-tls"
    assert not certificate["spec"].get("isCA")
    # The standard chain: selfSigned Issuer -> CA Certificate -> CA Issuer -> serving Certificate.
    # A selfSigned Issuer signing the serving certificate directly made every renewal a new trust
    # anchor, and the caBundle the CA injector had written stopped trusting what was served.
    chain = issuer_chain(objects, certificate)
    assert [c["metadata"]["name"] for c in chain] == ["draguard-serving", "draguard-root-ca"]
    ca = chain[-1]
    assert ca["spec"]["isCA"] is True
    assert ca["spec"]["issuerRef"] == {"name": "draguard-selfsigned", "kind": "Issuer"}
    assert find(objects, "Issuer", "draguard-selfsigned")["spec"] == {"selfSigned": {}}
    assert find(objects, "Issuer", "draguard-root-ca")["spec"] == {"ca": {"secretName": "draguard-root-ca"}}
    # Long-lived, and renewed with the same key: leaves it signed before a renewal still verify.
    assert hours(ca["spec"]["duration"]) >= 10 * hours(certificate["spec"]["duration"])
    assert ca["spec"]["privateKey"]["rotationPolicy"] == "Never"
    # The CA injector publishes the CA, not the serving certificate, in both configurations.
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        annotations = find(objects, kind, "draguard")["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/draguard-root-ca", kind
    # The CA's Secret is not the selfManaged CA Secret's name (the upgrade notes say to delete that
    # one after leaving selfManaged), and the serving Secret stays the one the pods mount.
    assert ca["spec"]["secretName"] not in ("draguard-ca", "draguard-tls")
    # cert-manager writes certificates: draguard gets no rights to Secrets or webhook configurations.
    assert not grants(objects, "", "secrets", "get") and not grants(objects, "", "secrets", "update")
    assert not grants(objects, "admissionregistration.k8s.io", "validatingwebhookconfigurations", "update")
    deployment = find(objects, "Deployment", "draguard")
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    tls = next(v for v in volumes if v["name"] == "tls")
    assert tls["secret"] == {"secretName": "draguard-tls"}  # not optional: cert-manager creates it
    # The CA key is in no pod.
    assert [v for v in volumes if (v.get("secret") or {}).get("secretName") == ca["spec"]["secretName"]] == []
    for obj in objects:
        if group_of(obj) in BUILTIN_GROUPS and kubernetes_validate is not None:
            validate(obj, "1.34.0")


def test_cert_manager_ca_duration_is_a_value(find: Find) -> None:
    objects = render({"tls": {"mode": "certManager", "certManager": {"caDuration": "175200h"}}})
    assert find(objects, "Certificate", "draguard-root-ca")["spec"]["duration"] == "175200h"


def test_cert_manager_with_an_existing_cluster_issuer(find: Find) -> None:
    objects = render(
        {
            "tls": {
                "mode": "certManager",
                "certManager": {"issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}},
            }
        }
    )
    assert find(objects, "Certificate", "draguard-serving")["spec"]["issuerRef"] == {
        "name": "corp-ca",
        "kind": "ClusterIssuer",
    }
    assert not [o for o in objects if o["kind"] == "Issuer"]
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "Certificate"] == ["draguard-serving"]
    # The issuer's own CA: it reaches the caBundle through the serving certificate's ca.crt.
    annotations = find(objects, "ValidatingWebhookConfiguration", "draguard")["metadata"]["annotations"]
    assert annotations["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/draguard-serving"


def test_secret_mode_templates_the_ca_bundle(find: Find) -> None:
    bundle = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n...\n").decode()
    objects = render({"tls": {"mode": "secret", "secret": {"name": "my-tls", "caBundle": bundle}}})
    for hook in webhooks(objects, find).values():
        assert hook["clientConfig"]["caBundle"] == bundle
    deployment = find(objects, "Deployment", "draguard")
    tls = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "tls")
    assert tls["secret"] == {"secretName": "my-tls"}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"tls": {"mode": "secret"}}, "caBundle"),
        ({"tls": {"mode": "auto"}}, "mode"),
        ({"webhooks": {"quota": {"failurePolicy": "Sometimes"}}}, "failurePolicy"),
        ({"webhooks": {"selectors": {"timeoutSeconds": 31}}}, "timeoutSeconds"),
        ({"rules": {"sharing": {"mode": "block"}}}, "mode"),
        ({"replicaCount": 0}, "replicaCount"),
        ({"tls": {"selfManaged": {"overlap": "1d"}}}, "overlap"),
        ({"replicas": 3}, "replicas"),
        ({"webhooks": {"namespaceSelector": {"matchLabel": {"a": "b"}}}}, "matchLabel"),
        ({"ports": {"https": 8443, "metrics": 8080, "health": 8080}}, "must differ"),
        ({"rules": {"quota": {"mode": "enforce", "modee": "audit"}}}, "modee"),
        ({"rules": {"personas": {"mode": "warn", "admins": {"grups": ["ops"]}}}}, "grups"),
        ({"rules": {"drain": {"driverPodSelector": {"matchLabel": {"a": "b"}}}}}, "matchLabel"),
    ],
)
def test_wrong_values_fail_at_install(values: dict[str, Any], message: str) -> None:
    with pytest.raises(HelmError) as err:
        render(values)
    assert message in str(err.value)


# -- config, metrics ---------------------------------------------------------------------------


def config_file(objects: list[dict[str, Any]], find: Find) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(
        find(objects, "ConfigMap", "draguard-config")["data"]["config.yaml"]
    )
    return loaded


def test_config_file_carries_rule_modes_and_loads_into_cert_settings(
    default_objects: list[dict[str, Any]], find: Find
) -> None:
    config = config_file(default_objects, find)
    assert {name: rule["mode"] for name, rule in config["rules"].items()} == {
        "selectors": "enforce",
        "prescheduled": "enforce",
        "personas": "warn",
        "drain": "enforce",
        "sharing": "enforce",
        "quota": "enforce",
    }
    settings = CertSettings.from_mapping(config["certificates"])
    assert settings.mode == "selfManaged"
    assert settings.targets.validating == ("draguard",) and settings.targets.mutating == ()
    assert settings.targets.tls_secret == "draguard-tls" and settings.targets.ca_secret == "draguard-ca"
    assert settings.lease_name == "draguard-certs"
    assert settings.policy.hosts == (f"draguard.{NAMESPACE}.svc", f"draguard.{NAMESPACE}.svc.cluster.local")


def test_rendered_config_is_what_serve_loads(
    tmp_path: Path, default_objects: list[dict[str, Any]], find: Find
) -> None:
    # The file the chart mounts must start draguard: serve refuses unknown keys, naming them.
    path = tmp_path / "config.yaml"
    path.write_text(find(default_objects, "ConfigMap", "draguard-config")["data"]["config.yaml"])
    loaded = load_config(str(path)).policy
    assert (loaded.snapshot, loaded.cel) == (Config().snapshot, Config().cel)
    assert loaded.rules == Config().rules  # the chart's defaults are draguard's own
    assert audit_config(str(path)).rules == loaded.rules  # one file for every command (issue 28)
    drain = {"mode": "enforce", "driverPodSelector": {"matchLabels": {"app": "gpu"}}}
    custom = render({"rules": {"drain": drain}})
    path.write_text(find(custom, "ConfigMap", "draguard-config")["data"]["config.yaml"])
    selector = load_config(str(path)).policy.rules.drain.driver_pod_selector
    assert selector is not None and selector.match_labels == {"app": "gpu"}


def test_the_snapshot_age_limit_is_a_value_the_alert_follows(tmp_path: Path, find: Find) -> None:
    """snapshot.maxAgeSeconds (when the rules stop deciding on a stale cluster state) reaches serve's
    config, and DraguardSnapshotStale fires past the same age."""
    objects = render({"snapshot": {"maxAgeSeconds": 45}, "metrics": {"prometheusRule": {"enabled": True}}})
    path = tmp_path / "config.yaml"
    path.write_text(find(objects, "ConfigMap", "draguard-config")["data"]["config.yaml"])
    assert load_config(str(path)).policy.snapshot.max_age_seconds == 45
    rules = find(objects, "PrometheusRule", "draguard")["spec"]["groups"][0]["rules"]
    (stale,) = [r for r in rules if r.get("alert") == "DraguardSnapshotStale"]
    assert stale["expr"] == "max(draguard_snapshot_age_seconds) > 45"
    with pytest.raises(HelmError, match="maxAgeSeconds"):
        render({"snapshot": {"maxAgeSeconds": 0}})


def test_the_mutating_webhook_turns_the_rules_mutation_on(tmp_path: Path, find: Find) -> None:
    """The mutating prescheduled rule only rewrites with rules.prescheduled.mutate: enabling its
    webhook without it would send every pinned pod to a rule that does nothing."""
    path = tmp_path / "config.yaml"
    for enabled in (True, False):
        objects = render({"webhooks": {"prescheduled": {"mutating": {"enabled": enabled}}}})
        path.write_text(find(objects, "ConfigMap", "draguard-config")["data"]["config.yaml"])
        assert load_config(str(path)).policy.rules.prescheduled.mutate is enabled
    # Stated once more by hand, in agreement: fine.
    agreeing = {
        "webhooks": {"prescheduled": {"mutating": {"enabled": True}}},
        "rules": {"prescheduled": {"mode": "enforce", "mutate": True}},
    }
    assert config_file(render(agreeing), find)["rules"]["prescheduled"]["mutate"] is True


@pytest.mark.parametrize("webhook", [True, False])
def test_a_mutate_setting_that_contradicts_the_webhook_fails_at_install(webhook: bool) -> None:
    """Either way round the pair does nothing the user asked for: a mutating webhook calling a rule
    that does not rewrite, or a rewrite setting no webhook calls; say so at install time."""
    values = {
        "webhooks": {"prescheduled": {"mutating": {"enabled": webhook}}},
        "rules": {"prescheduled": {"mode": "enforce", "mutate": not webhook}},
    }
    with pytest.raises(HelmError) as err:
        render(values)
    assert "webhooks.prescheduled.mutating.enabled" in str(err.value)


def test_config_change_rolls_the_pods(find: Find, default_objects: list[dict[str, Any]]) -> None:
    changed = render({"rules": {"quota": {"mode": "audit"}}})

    def checksum(objects: list[dict[str, Any]]) -> str:
        annotations = find(objects, "Deployment", "draguard")["spec"]["template"]["metadata"]["annotations"]
        return str(annotations["checksum/config"])

    assert config_file(changed, find)["rules"]["quota"]["mode"] == "audit"
    assert checksum(changed) != checksum(default_objects)


DRA_HEALTH = [
    'workqueue_adds_total{name="resource_claim"}',
    'workqueue_depth{name="resource_claim"}',
    "workqueue_work_duration_seconds_bucket",
    "scheduler_pod_scheduling_sli_duration_seconds_bucket",
    "scheduler_scheduling_algorithm_duration_seconds_bucket",
    "dra_operations_duration_seconds_bucket",
    "PrepareResources|UnprepareResources",
    "dra_grpc_operations_duration_seconds_bucket",
]
OWN = [
    "draguard_admission_requests_total",
    "draguard_admission_duration_seconds_bucket",
    "draguard_admission_in_flight",
    "draguard_event_loop_lag_seconds",
    "draguard_rule_findings_total",
    "draguard_snapshot_age_seconds",
    "draguard_snapshot_objects",
    "draguard_cel_cache_hit_ratio",
    "draguard_class_devices",
]


def test_dashboard_shows_own_metrics_next_to_dra_health(
    default_objects: list[dict[str, Any]], find: Find
) -> None:
    dashboard = find(default_objects, "ConfigMap", "draguard-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    parsed = json.loads(dashboard["data"]["draguard.json"])
    expressions = " ".join(t["expr"] for p in parsed["panels"] for t in p.get("targets", []))
    for metric in OWN + DRA_HEALTH:
        assert metric in expressions, metric


def test_service_monitor_and_alerts_when_enabled(find: Find) -> None:
    objects = render({"metrics": {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}}})
    (endpoint,) = find(objects, "ServiceMonitor", "draguard")["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("metrics", "/metrics")
    alerts = {
        r["alert"]: r
        for g in find(objects, "PrometheusRule", "draguard")["spec"]["groups"]
        for r in g["rules"]
    }
    assert "draguard_admission_duration_seconds_bucket" in alerts["DraguardAdmissionSlow"]["expr"]
    assert "{{ $labels.webhook }}" in alerts["DraguardAdmissionSlow"]["annotations"]["summary"]
    assert "DraguardDown" in alerts
    lag = alerts["DraguardEventLoopLagging"]
    assert lag["expr"] == "max by (instance) (draguard_event_loop_lag_seconds) > 0.5"
    assert "{{ $labels.instance }}" in lag["annotations"]["summary"]
    expiry = alerts["DraguardCertificateExpiresSoon"]["expr"]
    assert "draguard_cert_expiry_timestamp_seconds" in expiry and "time() < 7 * 24 * 3600" in expiry
    objects = render({"metrics": {"prometheusRule": {"enabled": True, "certificateExpiryDays": 2}}})
    rules = find(objects, "PrometheusRule", "draguard")["spec"]["groups"][0]["rules"]
    expiry = next(r for r in rules if r["alert"] == "DraguardCertificateExpiresSoon")["expr"]
    assert "time() < 2 * 24 * 3600" in expiry


def _schema_keys(schema: dict[str, Any]) -> dict[str, Any]:
    """The keys an object schema allows, each with its own nested keys (None: not an object)."""
    schema = next((s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"), schema)
    if schema.get("type") == "array":
        return _schema_keys(schema["items"])
    if "properties" not in schema:
        return {}
    assert schema.get("additionalProperties") is False, f"{sorted(schema['properties'])} allows any other key"
    return {key: _schema_keys(s) for key, s in schema["properties"].items()}


def _model_keys(annotation: Any) -> dict[str, Any]:
    """The keys draguard's config model reads at a field, each with its nested keys."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {f.alias or n: _model_keys(f.annotation) for n, f in annotation.model_fields.items()}
    return next((k for a in get_args(annotation) if (k := _model_keys(a))), {})


def test_the_rules_values_allow_exactly_the_keys_draguard_reads() -> None:
    """The schema lists every key of each rules section at every depth and refuses any other, so a
    misspelt key fails ``helm install`` instead of the pods refusing their config (issue 28)."""
    schema = json.loads((Path(CHART) / "values.schema.json").read_text())
    assert _schema_keys(schema["properties"]["rules"]) == _model_keys(RulesConfig)

