"""Render helm/kvplan with Helm's own template engine and check the manifests.

The renderer is ``helm-python-sdk`` (import name ``helm_python``): a PyPI wheel that
bundles ``libhelm_c``, a C ABI over Helm's Go SDK, loaded with ctypes. ``Chart.render``
does what ``helm template`` does, values.schema.json validation included, offline and
without a ``helm`` binary or a cluster. Install it with the dev extras, or alone:

    pip install 'helm-python-sdk==0.2.2'

When it is missing these tests FAIL rather than skip: an unrendered chart is an
untested chart, and a skip would let CI go green without looking at it.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
import yaml
from fastapi.testclient import TestClient

REPO = Path(__file__).resolve().parents[2]
CHART_DIR = REPO / "helm" / "kvplan"
RELEASE = "kv"
NAMESPACE = "planning"
FULLNAME = "kv-kvplan"
INSTALL_HINT = "pip install 'helm-python-sdk==0.2.2'"

PG_URL = "postgresql+psycopg://kvplan:s3cret-pw@postgres.db.svc:5432/kvplan"
TOKEN_A = "tok-aaaaaaaaaaaaaaaaaaaaaaaa"
TOKEN_B = "tok-bbbbbbbbbbbbbbbbbbbbbbbb"


class Rendered:
    """The objects of one render, plus NOTES.txt."""

    def __init__(self, files: dict[str, str]) -> None:
        self.notes = ""
        self.docs: list[dict[str, Any]] = []
        self.sources: list[str] = []
        for path, text in sorted(files.items()):
            if path.endswith("NOTES.txt"):
                self.notes = text
                continue
            for doc in yaml.safe_load_all(text):
                if doc:
                    self.docs.append(doc)
                    self.sources.append(path)

    def kinds(self) -> list[str]:
        return sorted(d["kind"] for d in self.docs)

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [d for d in self.all(kind) if name is None or d["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
        return found[0]

    def get(self, kind: str) -> dict[str, Any] | None:
        found = self.all(kind)
        return found[0] if found else None


Render = Callable[..., Rendered]


@pytest.fixture(scope="session")
def helm() -> ModuleType:
    try:
        import helm_python  # noqa: PLC0415 - optional import with a clear failure
    except ImportError as exc:  # pragma: no cover - exercised only when not installed
        pytest.fail(f"Helm renderer missing ({exc}); install it with: {INSTALL_HINT}")
    return helm_python


@pytest.fixture(scope="session")
def chart(helm: ModuleType) -> Iterator[Any]:
    loaded = helm.Chart.load(str(CHART_DIR))
    yield loaded
    loaded.close()


@pytest.fixture(scope="session")
def render(chart: Any) -> Render:
    def _render(values: dict[str, Any] | None = None, **opts: Any) -> Rendered:
        opts.setdefault("is_install", True)
        files = chart.render(values or {}, name=RELEASE, namespace=NAMESPACE, **opts)
        return Rendered(files)

    return _render


def external_db(**extra: Any) -> dict[str, Any]:
    return {"database": {"url": PG_URL}, **extra}


def containers(pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod_spec.get("initContainers", []), *pod_spec["containers"]]


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def server(r: Rendered) -> dict[str, Any]:
    pod = r.one("Deployment")["spec"]["template"]["spec"]
    (main,) = [c for c in pod["containers"] if c["name"] == "kvplan"]
    return main


def hook_annotations(obj: dict[str, Any]) -> tuple[set[str], int, set[str]]:
    ann = obj["metadata"].get("annotations", {})
    events = {e.strip() for e in ann.get("helm.sh/hook", "").split(",") if e.strip()}
    policies = {p.strip() for p in ann.get("helm.sh/hook-delete-policy", "").split(",")}
    return events, int(ann.get("helm.sh/hook-weight", "0")), policies


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


# --- lint and schema -------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [None, external_db(adminTokens={"tokens": [TOKEN_A]}, ingress={"enabled": True})],
    ids=["defaults", "external-db"],
)
def test_helm_lint_strict_has_no_warnings(helm: ModuleType, values: dict[str, Any] | None) -> None:
    report = helm.lint(str(CHART_DIR), values, strict=True, kube_version="v1.25.0")
    assert report["errors"] == []
    # Severity 2 = warning, 3 = error; 1 (info) is only "icon is recommended".
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_schema_accepts_the_chart_defaults(chart: Any) -> None:
    chart.validate_schema(chart.values)


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"replicaCount": "three"}, "/replicaCount"),
        ({"replicaCount": -1}, "/replicaCount"),
        ({"replicaCnt": 3}, "replicaCnt"),
        ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
        ({"service": {"port": 70000}}, "/service/port"),
        ({"adminTokens": {"tokens": ["short"]}}, "/adminTokens/tokens/0"),
        ({"adminTokens": {"tokens": [f"{TOKEN_A},{TOKEN_B}"]}}, "/adminTokens/tokens/0"),
        ({"database": {"url": "not a url"}}, "/database/url"),
        ({"podDisruptionBudget": {"minAvailable": "half"}}, "/podDisruptionBudget/minAvailable"),
        ({"serviceMonitor": {"interval": "often"}}, "/serviceMonitor/interval"),
        ({"livenessProbe": {"httpGet": {"path": "healthz", "port": "http"}}}, "/livenessProbe"),
    ],
)
def test_schema_rejects_bad_values(
    helm: ModuleType, render: Render, values: dict[str, Any], where: str
) -> None:
    with pytest.raises(helm.HelmValuesError) as excinfo:
        render(values)
    assert where in str(excinfo.value)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"database": {"url": PG_URL, "existingSecret": "db"}},
            "only one of database.url and database.existingSecret",
        ),
        (
            {"adminTokens": {"tokens": [TOKEN_A], "existingSecret": "admin"}},
            "only one of adminTokens.tokens and adminTokens.existingSecret",
        ),
    ],
)
def test_ambiguous_secrets_fail_the_render(
    helm: ModuleType, render: Render, values: dict[str, Any], message: str
) -> None:
    with pytest.raises(helm.HelmRenderError, match=message):
        render(values)


# --- defaults ----------------------------------------------------------------------------


def test_default_render_has_the_expected_objects(render: Render) -> None:
    r = render()
    assert r.kinds() == [
        "Deployment",
        "Pod",  # helm test hook
        "PodDisruptionBudget",
        "Service",
        "ServiceAccount",
    ]


def test_every_object_carries_the_standard_labels(render: Render) -> None:
    r = render(
        external_db(
            adminTokens={"tokens": [TOKEN_A]},
            ingress={"enabled": True},
            serviceMonitor={"enabled": True},
            autoscaling={"enabled": True},
        )
    )
    for doc in r.docs:
        labels = doc["metadata"]["labels"]
        assert labels["helm.sh/chart"] == "kvplan-0.1.0", doc["kind"]
        assert labels["app.kubernetes.io/name"] == "kvplan"
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/version"] == "0.1.0"


def test_probes_hit_healthz_and_readyz_on_the_http_port(render: Render) -> None:
    c = server(render())
    assert c["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert c["args"] == ["serve", "--host", "0.0.0.0", "--port", "8000"]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    # Readiness is the one probe that checks the database.
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz?allow_stale=true", "port": "http"}
    # The startup probe must allow a slow first boot before liveness may kill it.
    startup = c["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 30


def test_service_is_cluster_ip_with_an_http_port_that_selects_only_server_pods(
    render: Render,
) -> None:
    r = render(external_db())
    svc = r.one("Service", FULLNAME)
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["ports"] == [
        {
            "name": "http",
            "port": 8000,
            "targetPort": "http",
            "protocol": "TCP",
            "appProtocol": "http",
        }
    ]
    selector = svc["spec"]["selector"]
    server_pod = r.one("Deployment")["spec"]["template"]["metadata"]["labels"]
    assert selects(selector, server_pod)
    # Migration and `helm test` pods share the release labels but must never get traffic.
    job_pod = r.one("Job")["spec"]["template"]["metadata"]["labels"]
    test_pod = r.one("Pod")["metadata"]["labels"]
    assert not selects(selector, job_pod)
    assert not selects(selector, test_pod)
    assert r.one("Deployment")["spec"]["selector"]["matchLabels"] == selector


def test_pods_run_non_root_with_a_read_only_root_fs_and_a_tmp_emptydir(render: Render) -> None:
    for values in (None, external_db()):
        r = render(values)
        pod_specs = [r.one("Deployment")["spec"]["template"]["spec"]]
        pod_specs += [j["spec"]["template"]["spec"] for j in r.all("Job")]
        for pod in pod_specs:
            psc = pod["securityContext"]
            assert psc["runAsNonRoot"] is True
            assert psc["runAsUser"] == 10001
            assert psc["seccompProfile"] == {"type": "RuntimeDefault"}
            assert pod["automountServiceAccountToken"] is False
            volumes = {v["name"]: v for v in pod["volumes"]}
            assert "emptyDir" in volumes["tmp"]
            for c in containers(pod):
                sc = c["securityContext"]
                assert sc["readOnlyRootFilesystem"] is True, c["name"]
                assert sc["allowPrivilegeEscalation"] is False, c["name"]
                assert sc["capabilities"]["drop"] == ["ALL"], c["name"]
                mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
                assert mounts["/tmp"] == "tmp", c["name"]


def test_resources_have_requests_and_a_memory_limit(render: Render) -> None:
    r = render(external_db())
    for c in [server(r), *containers(r.one("Job")["spec"]["template"]["spec"])]:
        assert {"cpu", "memory"} <= set(c["resources"]["requests"]), c["name"]
        assert "memory" in c["resources"]["limits"], c["name"]


def test_replicas_spread_and_survive_disruptions(render: Render) -> None:
    r = render()
    deploy = r.one("Deployment")
    assert deploy["spec"]["replicas"] >= 2
    assert deploy["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
    (spread,) = deploy["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert selects(spread["labelSelector"]["matchLabels"], pod_labels)
    pdb = r.one("PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert "minAvailable" not in pdb["spec"]
    assert selects(pdb["spec"]["selector"]["matchLabels"], pod_labels)

    pdb = render({"podDisruptionBudget": {"minAvailable": "50%"}}).one("PodDisruptionBudget")
    assert pdb["spec"] == {"minAvailable": "50%", "selector": pdb["spec"]["selector"]}


def test_prestop_sleep_can_be_turned_off(render: Render) -> None:
    assert server(render())["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "5"]
    assert "lifecycle" not in server(render({"preStopSleepSeconds": 0}))


# --- database modes and the migration hook ----------------------------------------------


def test_embedded_mode_migrates_each_pod_in_an_init_container(render: Render) -> None:
    r = render()
    assert r.all("Job") == []  # nothing shared to migrate
    pod = r.one("Deployment")["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    assert init["command"] == ["/bin/sh", "-c", "kvplan migrate && kvplan seed"]
    for c in (init, server(r)):
        assert env_of(c)["DATABASE_URL"]["value"] == "sqlite:////data/kvplan.db"
        assert {m["mountPath"]: m["name"] for m in c["volumeMounts"]}["/data"] == "data"
    assert "emptyDir" in {v["name"]: v for v in pod["volumes"]}["data"]
    assert "WARNING: no database configured" in r.notes


def test_external_database_runs_migrate_and_seed_in_a_pre_install_upgrade_hook(
    render: Render,
) -> None:
    r = render(external_db())
    job = r.one("Job", f"{FULLNAME}-migrate")
    events, job_weight, policies = hook_annotations(job)
    assert events == {"pre-install", "pre-upgrade"}
    assert {"before-hook-creation", "hook-succeeded"} <= policies
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert job["spec"]["backoffLimit"] >= 1
    assert job["spec"]["activeDeadlineSeconds"] > 0
    (c,) = pod["containers"]
    assert c["command"] == ["/bin/sh", "-c", "kvplan migrate && kvplan seed"]
    assert c["image"] == server(r)["image"]

    # The release Secret does not exist yet at pre-install, so the Job reads the URL from
    # a hook Secret created before it (lower weight) and deleted after success.
    ref = env_of(c)["DATABASE_URL"]["valueFrom"]["secretKeyRef"]
    hook_secret = r.one("Secret", ref["name"])
    secret_events, secret_weight, secret_policies = hook_annotations(hook_secret)
    assert secret_events == events
    assert secret_weight < job_weight
    assert {"before-hook-creation", "hook-succeeded"} <= secret_policies
    assert base64.b64decode(hook_secret["data"][ref["key"]]).decode() == PG_URL

    # Replicas neither migrate nor get the URL in plain text.
    assert "initContainers" not in r.one("Deployment")["spec"]["template"]["spec"]
    db_env = env_of(server(r))["DATABASE_URL"]
    assert "value" not in db_env
    release_secret = r.one("Secret", db_env["valueFrom"]["secretKeyRef"]["name"])
    assert "helm.sh/hook" not in release_secret["metadata"].get("annotations", {})
    key = db_env["valueFrom"]["secretKeyRef"]["key"]
    assert base64.b64decode(release_secret["data"][key]).decode() == PG_URL
    assert "WARNING" not in r.notes


def test_migration_hook_can_be_disabled(render: Render) -> None:
    r = render(external_db(migration={"enabled": False}))
    assert r.all("Job") == []
    assert [s["metadata"]["name"] for s in r.all("Secret")] == [FULLNAME]


def test_database_url_from_an_existing_secret(render: Render) -> None:
    r = render({"database": {"existingSecret": "pg-creds", "existingSecretKey": "uri"}})
    expected = {"name": "pg-creds", "key": "uri"}
    assert env_of(server(r))["DATABASE_URL"]["valueFrom"]["secretKeyRef"] == expected
    (c,) = r.one("Job")["spec"]["template"]["spec"]["containers"]
    assert env_of(c)["DATABASE_URL"]["valueFrom"]["secretKeyRef"] == expected
    assert r.all("Secret") == []  # nothing of ours to render, not even a hook copy


# --- secrets -------------------------------------------------------------------------------


def test_admin_tokens_appear_only_inside_secrets(render: Render) -> None:
    r = render(
        external_db(adminTokens={"tokens": [TOKEN_A, TOKEN_B]}, serviceMonitor={"enabled": True})
    )
    encoded = base64.b64encode(f"{TOKEN_A},{TOKEN_B}".encode()).decode()
    # Every kind but Secret, ConfigMaps and pod specs included, plain or base64.
    for doc, source in zip(r.docs, r.sources, strict=True):
        if doc["kind"] == "Secret":
            continue
        text = yaml.safe_dump(doc)
        for needle in (TOKEN_A, TOKEN_B, encoded):
            assert needle not in text, f"admin token leaked into {doc['kind']} ({source})"
    assert TOKEN_A not in r.notes

    secret = r.one("Secret", FULLNAME)
    assert base64.b64decode(secret["data"]["admin-tokens"]).decode() == f"{TOKEN_A},{TOKEN_B}"
    ref = env_of(server(r))["KVPLAN_ADMIN_TOKENS"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": FULLNAME, "key": "admin-tokens"}
    # The migration job has no business with admin tokens.
    (job_c,) = r.one("Job")["spec"]["template"]["spec"]["containers"]
    assert "KVPLAN_ADMIN_TOKENS" not in env_of(job_c)


def test_admin_tokens_from_an_existing_secret(render: Render) -> None:
    r = render({"adminTokens": {"existingSecret": "kvplan-admin"}})
    ref = env_of(server(r))["KVPLAN_ADMIN_TOKENS"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "kvplan-admin", "key": "admin-tokens"}
    assert r.all("Secret") == []
    pod_annotations = r.one("Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert "checksum/secret" not in pod_annotations


def test_no_admin_tokens_means_no_token_env(render: Render) -> None:
    assert "KVPLAN_ADMIN_TOKENS" not in env_of(server(render()))


def test_pods_roll_when_the_chart_secret_changes(render: Render) -> None:
    def checksum(token: str) -> str:
        r = render(external_db(adminTokens={"tokens": [token]}))
        annotations = r.one("Deployment")["spec"]["template"]["metadata"]["annotations"]
        return str(annotations["checksum/secret"])

    assert checksum(TOKEN_A) != checksum(TOKEN_B)


def test_non_secret_settings_are_plain_env(render: Render) -> None:
    env = env_of(server(render({"config": {"logLevel": "debug", "catalogTtlSeconds": 30}})))
    assert env["KVPLAN_LOG_LEVEL"]["value"] == "debug"
    assert env["KVPLAN_CATALOG_TTL_SECONDS"]["value"] == "30"


# --- optional objects ---------------------------------------------------------------------


def test_service_monitor_is_gated_and_scrapes_metrics_on_http(render: Render) -> None:
    assert render().get("ServiceMonitor") is None
    r = render({"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}})
    sm = r.one("ServiceMonitor", FULLNAME)
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["metadata"]["labels"]["release"] == "prom"
    (endpoint,) = sm["spec"]["endpoints"]
    assert endpoint["port"] == "http"
    assert endpoint["path"] == "/metrics"
    assert sm["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert selects(sm["spec"]["selector"]["matchLabels"], r.one("Service")["metadata"]["labels"])


def test_ingress_routes_to_the_service_port(render: Render) -> None:
    assert render().get("Ingress") is None
    r = render(
        {
            "ingress": {
                "enabled": True,
                "className": "nginx",
                "hosts": [{"host": "kvplan.test", "paths": [{"path": "/", "pathType": "Prefix"}]}],
                "tls": [{"secretName": "kvplan-tls", "hosts": ["kvplan.test"]}],
            }
        }
    )
    ing = r.one("Ingress", FULLNAME)
    assert ing["spec"]["ingressClassName"] == "nginx"
    (rule,) = ing["spec"]["rules"]
    assert rule["host"] == "kvplan.test"
    (path,) = rule["http"]["paths"]
    assert path["backend"]["service"] == {"name": FULLNAME, "port": {"number": 8000}}
    assert ing["spec"]["tls"] == [{"secretName": "kvplan-tls", "hosts": ["kvplan.test"]}]
    assert "https://kvplan.test/v1/capacity" in r.notes


def test_hpa_owns_the_replica_count_when_enabled(render: Render) -> None:
    assert render().get("HorizontalPodAutoscaler") is None
    r = render({"autoscaling": {"enabled": True, "minReplicas": 3, "maxReplicas": 9}})
    hpa = r.one("HorizontalPodAutoscaler", FULLNAME)
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": FULLNAME,
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 9)
    assert "replicas" not in r.one("Deployment")["spec"]


def test_image_tag_defaults_to_app_version_and_a_digest_wins(render: Render) -> None:
    assert server(render())["image"] == "kvplan:0.1.0"
    digest = "sha256:" + "ab" * 32
    r = render({"image": {"repository": "reg.test/kvplan", "tag": "9.9.9", "digest": digest}})
    assert server(r)["image"] == f"reg.test/kvplan@{digest}"


def test_helm_test_pod_checks_readyz_through_the_service(render: Render) -> None:
    pod = render().one("Pod")
    events, _, _ = hook_annotations(pod)
    assert events == {"test"}
    script = pod["spec"]["containers"][0]["command"][-1]
    assert f"http://{FULLNAME}:8000/readyz" in script


def test_notes_show_how_to_call_the_capacity_endpoint(render: Render) -> None:
    notes = render().notes
    assert f"http://{FULLNAME}.{NAMESPACE}.svc:8000" in notes
    assert f"port-forward service/{FULLNAME} 8000:8000" in notes
    assert "/v1/capacity?" in notes


# --- static checks that need no renderer ---------------------------------------------------

VALUES_REF = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


def test_every_values_reference_in_templates_exists_in_values_yaml() -> None:
    """Helm renders a misspelt `.Values.x` as empty; catch that here instead."""
    defaults = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    missing = []
    for tpl in sorted((CHART_DIR / "templates").rglob("*")):
        if not tpl.is_file():
            continue
        for match in VALUES_REF.finditer(tpl.read_text()):
            node: Any = defaults
            for key in match.group(1).strip(".").split("."):
                if not isinstance(node, dict) or key not in node:
                    missing.append(f"{tpl.relative_to(CHART_DIR)}: .Values{match.group(1)}")
                    break
                node = node[key]
    assert missing == []


def test_readme_keda_example_is_a_valid_scaled_object_that_kvplan_answers(
    client: TestClient,
) -> None:
    readme = (CHART_DIR / "README.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", readme, flags=re.DOTALL)
    scaled = [d for b in blocks for d in yaml.safe_load_all(b) if d and d["kind"] == "ScaledObject"]
    assert len(scaled) == 1
    (so,) = scaled
    assert so["apiVersion"] == "keda.sh/v1alpha1"
    triggers = {t["type"]: t["metadata"] for t in so["spec"]["triggers"]}
    assert set(triggers) == {"metrics-api", "prometheus"}
    meta = triggers["metrics-api"]
    url = urlsplit(meta["url"])
    assert url.scheme == "http"
    assert url.path == "/v1/capacity"
    assert meta["format"] == "json"
    # KEDA reads trigger metadata as strings; an unquoted number breaks the ScaledObject.
    for trigger in triggers.values():
        for key in ("targetValue", "threshold"):
            if key in trigger:
                assert isinstance(trigger[key], str)
                float(trigger[key])
    # The query the example polls is one kvplan answers, with a number where KEDA looks.
    answer = client.get(url.path, params=dict(parse_qsl(url.query)))
    assert answer.status_code == 200, answer.text
    value = answer.json()[meta["valueLocation"]]
    assert isinstance(value, int)
    assert value >= 1
    # The Prometheus threshold is the max_num_seqs kvplan answers for the same layout.
    query = {k: v for k, v in parse_qsl(url.query) if k != "peak_concurrency"}
    per_pod = client.get(url.path, params=query).json()["max_num_seqs"]
    assert triggers["prometheus"]["threshold"] == str(per_pod)
