"""The chart's autoscaling objects and examples, resolved against the running app.

The chart is rendered with Helm's own engine (see test_helm_chart.py). Every JSON path a KEDA
`metrics-api` trigger names is read from a real answer of the app the way KEDA reads it
(tests/keda.py: GJSON, status 200 only); every PromQL query is parsed with `promql-parser`
(Prometheus's grammar), and each kvplan metric it selects, with the labels it matches on, must
be in a real /metrics scrape of the app (prometheus_client's text parser). vLLM's side is
checked against the names vLLM registers (vllm/v1/metrics/loggers.py, PrometheusStatLogger:
`vllm:num_requests_running`, `vllm:num_requests_waiting`) and against pod names the way a
Deployment makes them (<deployment>-<pod-template-hash>-<suffix>).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import promql_parser
import pytest
import yaml
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ADMIN
from tests.deploy.test_helm_chart import CHART_DIR, FULLNAME, INSTALL_HINT, NAMESPACE, RELEASE
from tests.deploy.test_helm_chart import Rendered as _Rendered
from tests.keda import metrics_api_value

EXAMPLES = CHART_DIR / "examples"
PROFILE = json.loads((EXAMPLES / "deployment-profile.json").read_text())
VLLM_GAUGES = {"vllm:num_requests_running", "vllm:num_requests_waiting"}
# What a Deployment's ReplicaSet names its pods: <deployment>-<pod-template-hash>-<5 chars>.
POD = "{}-7d9f8c6b5-x2bqz"


@pytest.fixture(scope="module")
def chart() -> Iterator[Any]:
    try:
        import helm_python  # noqa: PLC0415 - optional import with a clear failure
    except ImportError as exc:  # pragma: no cover - exercised only when not installed
        pytest.fail(f"Helm renderer missing ({exc}); install it with: {INSTALL_HINT}")
    loaded = helm_python.Chart.load(str(CHART_DIR))
    yield loaded
    loaded.close()


@pytest.fixture(scope="module")
def helm(chart: Any) -> ModuleType:
    import helm_python  # noqa: PLC0415

    return helm_python


def render(chart: Any, values: dict[str, Any]) -> _Rendered:
    return _Rendered(chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True))


KEDA: dict[str, Any] = {
    "enabled": True,
    "profile": PROFILE["name"],
    "namespace": PROFILE["namespace"],
    "scaleTargetRef": {"name": PROFILE["workload"]},
    "prometheus": {
        "enabled": True,
        "serverAddress": "http://prometheus-operated.monitoring.svc:9090",
    },
}


@pytest.fixture
def profile(client: TestClient) -> dict[str, Any]:
    """The example profile, stored as the examples' comments say."""
    response = client.post("/v1/deployments", json=PROFILE, headers=ADMIN)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def scrape(client: TestClient) -> dict[str, list[dict[str, str]]]:
    """Each metric family of /metrics -> the label sets of its samples."""
    text = client.get("/metrics").text
    return {f.name: [s.labels for s in f.samples] for f in text_string_to_metric_families(text)}


def selectors(query: str) -> list[Any]:
    """Every vector selector in a PromQL expression, parsed by Prometheus's grammar."""
    found: list[Any] = []

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)

    promql_parser.walk(promql_parser.parse(query), visit)
    return found


def matchers(selector: Any) -> dict[str, tuple[str, str]]:
    return {m.name: (str(m.op), m.value) for m in selector.matchers.matchers}


def assert_kvplan_selectors_exist(query: str, scraped: dict[str, list[dict[str, str]]]) -> None:
    """Each kvplan selector names a scraped family and matches at least one of its samples."""
    kvplan = [s for s in selectors(query) if (s.name or "").startswith("kvplan_")]
    assert kvplan, query
    for selector in kvplan:
        assert selector.name in scraped, selector.name
        wanted = matchers(selector)
        hits = [
            labels
            for labels in scraped[selector.name]
            if all(
                labels.get(name) == value
                for name, (op, value) in wanted.items()
                if op == "MatchOp.Equal"
            )
            and all(name in labels for name in wanted)
        ]
        assert hits, (selector.name, wanted, scraped[selector.name])


def assert_vllm_selectors_pick_the_workload(query: str, namespace: str, workload: str) -> None:
    vllm = [s for s in selectors(query) if (s.name or "").startswith("vllm:")]
    assert {s.name for s in vllm} == VLLM_GAUGES
    for selector in vllm:
        wanted = matchers(selector)
        assert wanted["namespace"] == ("MatchOp.Equal", namespace)
        op, pods = wanted["pod"]
        assert op == "MatchOp.Re"
        # PromQL regexes are anchored: this Deployment's pods only, not another one's
        assert re.fullmatch(pods, POD.format(workload))
        assert not re.fullmatch(pods, POD.format(f"{workload}-canary"))


# ---- the chart's objects -------------------------------------------------------------------------


def test_nothing_autoscaling_is_rendered_by_default(chart: Any) -> None:
    r = render(chart, {})
    for kind in ("ScaledObject", "TriggerAuthentication", "NetworkPolicy"):
        assert r.all(kind) == [], kind


def test_the_scaled_object_targets_the_workload_in_its_namespace(chart: Any) -> None:
    r = render(chart, {"keda": KEDA})
    so = r.one("ScaledObject")
    assert so["apiVersion"] == "keda.sh/v1alpha1"
    assert so["metadata"]["namespace"] == PROFILE["namespace"]
    assert so["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": PROFILE["workload"],
    }
    assert so["spec"]["fallback"] == {"failureThreshold": 3, "replicas": 2}
    assert so["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE
    assert [t["type"] for t in so["spec"]["triggers"]] == ["metrics-api", "prometheus"]
    # KEDA reads trigger metadata as strings: an unquoted number breaks the ScaledObject
    for trigger in so["spec"]["triggers"]:
        assert all(isinstance(v, str) for v in trigger["metadata"].values()), trigger
    assert r.all("TriggerAuthentication") == []
    target = f"Deployment {PROFILE['namespace']}/{PROFILE['workload']}"
    assert f'KEDA scales {target} from profile "{PROFILE["name"]}"' in r.notes
    assert f"{FULLNAME}.{NAMESPACE}.svc:8000/v1/deployments/<profile>/capacity" in r.notes


def test_the_metrics_api_trigger_reads_a_number_from_the_profile(
    chart: Any, client: TestClient, profile: dict[str, Any]
) -> None:
    r = render(chart, {"keda": KEDA})
    (trigger,) = [t for t in r.one("ScaledObject")["spec"]["triggers"] if t["type"] != "prometheus"]
    meta = trigger["metadata"]
    url = urlsplit(meta["url"])
    # the in-cluster name of the chart's own Service
    assert url.netloc == f"{FULLNAME}.{NAMESPACE}.svc:8000"
    assert r.one("Service", FULLNAME)["spec"]["ports"][0]["port"] == 8000
    response = client.get(url.path, params=dict(parse_qsl(url.query)))
    value = metrics_api_value(
        response.status_code, response.content, meta["valueLocation"], meta["format"]
    )
    capacity = response.json()
    # the example's peak of 400 over max_num_seqs per replica, rounded up
    assert value == -(-PROFILE["peak_concurrency"] // capacity["max_num_seqs"])
    assert value >= 1


def test_the_prometheus_trigger_divides_vllm_load_by_the_profiles_gauge(
    chart: Any, client: TestClient, profile: dict[str, Any]
) -> None:
    r = render(chart, {"keda": KEDA})
    (trigger,) = [t for t in r.one("ScaledObject")["spec"]["triggers"] if t["type"] == "prometheus"]
    meta = trigger["metadata"]
    assert meta["ignoreNullValues"] == "false"
    assert float(meta["threshold"]) == 0.8
    query = meta["query"]
    tree = promql_parser.parse(query)
    assert isinstance(tree, promql_parser.BinaryExpr)
    assert str(tree.op) == "/"
    assert_kvplan_selectors_exist(query, scrape(client))
    assert_vllm_selectors_pick_the_workload(query, PROFILE["namespace"], PROFILE["workload"])


def test_a_dotted_deployment_name_is_a_literal_dot_in_the_pod_regex(chart: Any) -> None:
    keda = {**KEDA, "scaleTargetRef": {"name": "llama.vllm"}}
    query = render(chart, {"keda": keda}).one("ScaledObject")["spec"]["triggers"][1]["metadata"]
    assert_vllm_selectors_pick_the_workload(query["query"], PROFILE["namespace"], "llama.vllm")
    for selector in selectors(query["query"]):
        if selector.name in VLLM_GAUGES:
            assert not re.fullmatch(matchers(selector)["pod"][1], POD.format("llamaXvllm"))


def test_trigger_authentication_for_an_api_key_in_the_query_string(
    chart: Any, client: TestClient, profile: dict[str, Any]
) -> None:
    auth = {
        "enabled": True,
        "mode": "apiKey",
        "method": "query",
        "secretName": "kvplan-key",
        "secretKey": "key",
    }
    r = render(chart, {"keda": {**KEDA, "authentication": auth}})
    ta = r.one("TriggerAuthentication")
    assert ta["metadata"]["namespace"] == PROFILE["namespace"]
    assert ta["spec"]["secretTargetRef"] == [
        {"parameter": "apiKey", "name": "kvplan-key", "key": "key"}
    ]
    (trigger,) = [t for t in r.one("ScaledObject")["spec"]["triggers"] if t["type"] != "prometheus"]
    assert trigger["authenticationRef"] == {"name": ta["metadata"]["name"]}
    assert trigger["metadata"]["authModes"] == "apiKey"
    assert trigger["metadata"]["method"] == "query"
    # KEDA then appends api_key=<key> (keyParamName's default): the app still answers
    url = urlsplit(trigger["metadata"]["url"])
    response = client.get(url.path, params={"api_key": "k" * 32})
    assert metrics_api_value(response.status_code, response.content, "max_num_seqs", "json") > 0

    bearer = {"enabled": True, "secretName": "kvplan-token"}
    r = render(chart, {"keda": {**KEDA, "authentication": bearer}})
    assert r.one("TriggerAuthentication")["spec"]["secretTargetRef"][0]["parameter"] == "token"
    (trigger,) = [t for t in r.one("ScaledObject")["spec"]["triggers"] if t["type"] != "prometheus"]
    assert trigger["metadata"]["authModes"] == "bearer"
    assert "method" not in trigger["metadata"]


@pytest.mark.parametrize(
    ("keda", "message"),
    [
        ({**KEDA, "profile": ""}, "keda.enabled needs keda.profile"),
        ({**KEDA, "scaleTargetRef": {"name": ""}}, "keda.scaleTargetRef.name"),
        (
            {**KEDA, "prometheus": {"enabled": True, "serverAddress": ""}},
            "keda.prometheus.serverAddress",
        ),
        (
            {**KEDA, "metricsApi": {"enabled": False}, "prometheus": {"enabled": False}},
            "needs a trigger",
        ),
        ({**KEDA, "authentication": {"enabled": True}}, "keda.authentication.secretName"),
    ],
)
def test_incomplete_keda_values_fail_the_render(
    chart: Any, helm: ModuleType, keda: dict[str, Any], message: str
) -> None:
    with pytest.raises(helm.HelmRenderError, match=message):
        render(chart, {"keda": keda})


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"keda": {"prometheus": {"threshold": 0.8}}}, "/keda/prometheus/threshold"),
        ({"keda": {"metricsApi": {"targetValue": "one"}}}, "/keda/metricsApi/targetValue"),
        ({"keda": {"authentication": {"mode": "basic"}}}, "/keda/authentication/mode"),
        ({"networkPolicy": {"ingress": {"prometheus": [{"pods": {}}]}}}, "prometheus/0"),
        ({"networkPolicy": {"egress": {"database": {"port": 0}}}}, "/database/port"),
    ],
)
def test_the_schema_rejects_bad_autoscaling_values(
    chart: Any, helm: ModuleType, values: dict[str, Any], where: str
) -> None:
    with pytest.raises(helm.HelmValuesError) as caught:
        render(chart, values)
    assert where in str(caught.value)


def test_lint_strict_passes_with_every_autoscaling_object(helm: ModuleType) -> None:
    values = {
        "keda": {**KEDA, "authentication": {"enabled": True, "secretName": "s"}},
        "networkPolicy": {"enabled": True},
    }
    report = helm.lint(str(CHART_DIR), values, strict=True, kube_version="v1.25.0")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


# ---- the network policy ------------------------------------------------------------------------


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_the_network_policy_lets_in_only_the_callers_and_out_only_postgres_and_dns(
    chart: Any,
) -> None:
    r = render(chart, {"networkPolicy": {"enabled": True}, "database": {"url": "postgresql://x/y"}})
    policy = r.one("NetworkPolicy", FULLNAME)
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    # the server pods, not the migration job or the test pod
    selector = spec["podSelector"]["matchLabels"]
    assert _selects(selector, r.one("Deployment")["spec"]["template"]["metadata"]["labels"])
    assert not _selects(selector, r.one("Job")["spec"]["template"]["metadata"]["labels"])
    assert not _selects(selector, r.one("Pod")["metadata"]["labels"])

    (rule,) = spec["ingress"]
    assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]
    namespaces = [
        peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
        for peer in rule["from"]
        if "namespaceSelector" in peer
    ]
    assert namespaces == ["ingress-nginx", "monitoring", "keda"]
    # the one peer without a namespace: this release's `helm test` pod
    (own,) = [peer for peer in rule["from"] if "namespaceSelector" not in peer]
    assert _selects(own["podSelector"]["matchLabels"], r.one("Pod")["metadata"]["labels"])

    database, dns = spec["egress"]
    assert database["ports"] == [{"port": 5432, "protocol": "TCP"}]
    assert dns["ports"] == [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]
    assert dns["to"][0]["podSelector"]["matchLabels"] == {"k8s-app": "kube-dns"}


def test_with_no_callers_nothing_may_call_in(chart: Any) -> None:
    no_one = {"ingressController": [], "prometheus": [], "autoscalers": [], "allowHelmTest": False}
    policy = render(chart, {"networkPolicy": {"enabled": True, "ingress": no_one}})
    # an empty list denies every caller; a rule without `from` would allow them all
    assert policy.one("NetworkPolicy")["spec"]["ingress"] == []


def test_the_database_peers_narrow_egress(chart: Any) -> None:
    to = [{"ipBlock": {"cidr": "10.0.5.0/24"}}]
    values = {"networkPolicy": {"enabled": True, "egress": {"database": {"port": 6432, "to": to}}}}
    database = render(chart, values).one("NetworkPolicy")["spec"]["egress"][0]
    assert database == {"ports": [{"port": 6432, "protocol": "TCP"}], "to": to}


# ---- the examples ------------------------------------------------------------------------------


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def test_the_examples_describe_the_example_profile() -> None:
    for name in ("keda-metrics-api.yaml", "keda-prometheus.yaml", "hpa-prometheus-adapter.yaml"):
        scaler = next(d for d in _docs(name) if d["kind"] != "TriggerAuthentication")
        assert scaler["metadata"]["namespace"] == PROFILE["namespace"], name
        assert scaler["spec"]["scaleTargetRef"]["name"] == PROFILE["workload"], name


def test_the_metrics_api_example_resolves_against_the_app(
    client: TestClient, profile: dict[str, Any]
) -> None:
    so, ta = _docs("keda-metrics-api.yaml")
    assert (so["kind"], ta["kind"]) == ("ScaledObject", "TriggerAuthentication")
    (trigger,) = so["spec"]["triggers"]
    meta = trigger["metadata"]
    assert trigger["authenticationRef"]["name"] == ta["metadata"]["name"]
    assert ta["spec"]["secretTargetRef"][0]["parameter"] == "apiKey"
    assert all(isinstance(v, str) for v in meta.values())
    url = urlsplit(meta["url"])
    params = dict(parse_qsl(url.query))
    if meta.get("authModes") == "apiKey" and meta.get("method") == "query":
        params[meta.get("keyParamName", "api_key")] = "a-key-from-the-secret"
    response = client.get(url.path, params=params)
    value = metrics_api_value(
        response.status_code, response.content, meta["valueLocation"], meta["format"]
    )
    assert value == -(-PROFILE["peak_concurrency"] // response.json()["max_num_seqs"])


def test_the_prometheus_example_selects_metrics_that_exist(
    client: TestClient, profile: dict[str, Any]
) -> None:
    (so,) = _docs("keda-prometheus.yaml")
    (trigger,) = so["spec"]["triggers"]
    meta = trigger["metadata"]
    assert meta["ignoreNullValues"] == "false"
    assert all(isinstance(v, str) for v in meta.values())
    assert_kvplan_selectors_exist(meta["query"], scrape(client))
    assert_vllm_selectors_pick_the_workload(
        meta["query"], PROFILE["namespace"], PROFILE["workload"]
    )


def _adapter_query(rule: dict[str, Any], hpa: dict[str, Any]) -> str:
    """The query prometheus-adapter sends for the HPA's metric.

    pkg/naming/metrics_query.go, BuildExternal: <<.Series>> is the series name and
    <<.LabelMatchers>> the selector's labels as `name="value"` joined by commas (no namespace
    label when `namespaced: false`).
    """
    series = promql_parser.parse(rule["seriesQuery"]).name
    labels = hpa["spec"]["metrics"][0]["external"]["metric"]["selector"]["matchLabels"]
    label_matchers = ",".join(f'{name}="{value}"' for name, value in labels.items())
    return str(
        rule["metricsQuery"]
        .replace("<<.Series>>", series)
        .replace("<<.LabelMatchers>>", label_matchers)
    )


def test_the_prometheus_adapter_rule_and_hpa_resolve_against_the_app(
    client: TestClient, profile: dict[str, Any]
) -> None:
    (values,) = _docs("prometheus-adapter-values.yaml")
    (rule,) = values["rules"]["external"]
    (hpa,) = _docs("hpa-prometheus-adapter.yaml")
    assert hpa["apiVersion"] == "autoscaling/v2"
    (metric,) = hpa["spec"]["metrics"]
    assert metric["external"]["metric"]["name"] == rule["name"]["as"]
    assert re.fullmatch(rule["name"]["matches"], promql_parser.parse(rule["seriesQuery"]).name)
    assert rule["resources"] == {"namespaced": False}
    assert metric["external"]["target"] == {"type": "AverageValue", "averageValue": "800m"}

    scraped = scrape(client)
    assert_kvplan_selectors_exist(rule["seriesQuery"], scraped)
    query = _adapter_query(rule, hpa)
    assert_kvplan_selectors_exist(query, scraped)

    # vLLM's side: both gauges, and a pod of the workload maps onto the profile's labels
    (vllm,) = [s for s in selectors(query) if "__name__" in matchers(s)]
    op, names = matchers(vllm)["__name__"]
    assert op == "MatchOp.Re"
    assert {name for name in VLLM_GAUGES if re.fullmatch(names, name)} == VLLM_GAUGES
    (sample,) = [
        s for s in scraped["kvplan_deployment_max_num_seqs"] if s["deployment"] == PROFILE["name"]
    ]
    pod_to_workload = re.search(r'"workload", "\$1", "pod", "([^"]+)"', query)
    assert pod_to_workload is not None
    derived = re.fullmatch(pod_to_workload.group(1), POD.format(PROFILE["workload"]))
    assert derived is not None
    assert derived.group(1) == sample["workload"] == PROFILE["workload"]
    assert sample["workload_namespace"] == hpa["metadata"]["namespace"]


def test_the_readme_points_at_every_example() -> None:
    readme = (CHART_DIR / "README.md").read_text() + (
        Path(CHART_DIR).parents[1] / "README.md"
    ).read_text()
    for example in sorted(EXAMPLES.iterdir()):
        assert f"examples/{example.name}" in readme, example.name


def test_the_readme_autoscaler_snippets_resolve_against_the_app(
    client: TestClient, profile: dict[str, Any]
) -> None:
    readme = (CHART_DIR.parents[1] / "README.md").read_text()
    section = readme.split("## Autoscalers\n", 1)[1].split("\n## ", 1)[0]
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)]
    triggers = {t["type"]: t["metadata"] for b in blocks for t in b.get("triggers", [])}
    assert set(triggers) == {"metrics-api", "prometheus"}
    for meta in triggers.values():
        assert all(isinstance(v, str) for v in meta.values()), meta
    url = urlsplit(triggers["metrics-api"]["url"])
    response = client.get(url.path)
    value = metrics_api_value(
        response.status_code, response.content, triggers["metrics-api"]["valueLocation"], "json"
    )
    assert value >= 1
    query = triggers["prometheus"]["query"]
    assert_kvplan_selectors_exist(query, scrape(client))
    assert_vllm_selectors_pick_the_workload(query, PROFILE["namespace"], PROFILE["workload"])
    (hpa_metrics,) = [b["metrics"] for b in blocks if "metrics" in b]
    (values,) = _docs("prometheus-adapter-values.yaml")
    assert (
        hpa_metrics[0]["external"]["metric"]["name"] == values["rules"]["external"][0]["name"]["as"]
    )
    labels = hpa_metrics[0]["external"]["metric"]["selector"]["matchLabels"]
    assert labels == {"deployment": PROFILE["name"]}
