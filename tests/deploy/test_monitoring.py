"""Prometheus rules, their unit tests, the Alertmanager route and the Grafana dashboard."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from tests.deploy import support as s

MON = s.DEPLOY / "monitoring"
RULES = MON / "prometheus" / "remediator.rules.yaml"
RULES_TEST = MON / "prometheus" / "remediator.rules.test.yaml"
ALERTMANAGER = MON / "alertmanager" / "alertmanager.yaml"
DASHBOARD = MON / "grafana" / "remediator-cold-start.json"


def _exported() -> set[str]:
    """Every series name the service really exports, read off its own registries (so a
    rule or panel on a metric that does not exist fails here, not on a dashboard)."""

    from remediator.core.decider import node_pace_gauges
    from remediator.metrics.export import TrackerCollector
    from remediator.runtime.metrics import RuntimeMetrics
    from remediator.session import Session
    from remediator.sources.metrics import SourceMetrics

    session = Session()
    registry = session.registry
    RuntimeMetrics.on(registry)
    SourceMetrics.on(registry)
    registry.register(TrackerCollector(session.tracker, lambda: 0.0))
    registry.register(node_pace_gauges(lambda: [session.decider]))
    names = {"up", "ALERTS"}
    for family in registry.collect():
        names.add(family.name)
        if family.type == "counter":
            names.add(family.name + "_total")
        if family.type == "histogram":
            names.update(family.name + s for s in ("_bucket", "_sum", "_count"))
    return names


EXPORTED = _exported()


def _promtool(*args: str, cwd: Path | None = None) -> str:
    out = s.run([s.tool("promtool"), *args], cwd=cwd)
    assert out.returncode == 0, f"promtool {' '.join(args)}:\n{out.stdout}\n{out.stderr}"
    return out.stdout


def test_promtool_check_rules() -> None:
    assert "SUCCESS" in _promtool("check", "rules", str(RULES))


def test_promtool_test_rules() -> None:
    assert "SUCCESS" in _promtool("test", "rules", RULES_TEST.name, cwd=RULES_TEST.parent)


def test_promtool_test_rules_can_fail(tmp_path: Path) -> None:
    """The unit tests are sensitive: an alert that fires one evaluation early fails them."""
    (tmp_path / RULES.name).write_text(RULES.read_text().replace("for: 2m", "for: 1m"))
    (tmp_path / RULES_TEST.name).write_text(RULES_TEST.read_text())
    out = s.run([s.tool("promtool"), "test", "rules", RULES_TEST.name], cwd=tmp_path)
    assert out.returncode != 0 and "VLLMEngineInitSlow" in out.stdout + out.stderr


def test_prometheusrule_carries_the_same_groups_and_passes_promtool(tmp_path: Path) -> None:
    rule = s.find(s.render(MON), "PrometheusRule", "remediator", "remediator")
    assert rule["spec"] == yaml.safe_load(RULES.read_text())
    extracted = tmp_path / "from-prometheusrule.yaml"
    extracted.write_text(yaml.safe_dump(rule["spec"]))
    _promtool("check", "rules", str(extracted))


def test_alert_sres_run_today_is_per_pod_three_evaluations() -> None:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    group = next(
        g for g in groups if any(r.get("alert") == "VLLMEngineInitSlow" for r in g["rules"])
    )
    alert = next(r for r in group["rules"] if r.get("alert") == "VLLMEngineInitSlow")
    assert group["interval"] == "1m" and alert["for"] == "2m"  # true at 0, 1m, 2m: three in a row
    assert "by (namespace, pod)" in alert["expr"] and "> 60" in alert["expr"]


def test_servicemonitor_selects_the_service_port() -> None:
    mon = s.find(s.render(MON), "ServiceMonitor", "remediator")
    svc = s.find(s.render(s.DEPLOY / "base"), "Service", "remediator")
    labels = svc["metadata"]["labels"]
    assert mon["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert {e["port"] for e in mon["spec"]["endpoints"]} <= {
        p["name"] for p in svc["spec"]["ports"]
    }
    assert (
        labels[mon["spec"]["jobLabel"]] == "remediator"
    )  # RemediatorDown matches job="remediator"


def test_amtool_check_config() -> None:
    out = s.run([s.tool("amtool"), "check-config", str(ALERTMANAGER)])
    assert out.returncode == 0 and "SUCCESS" in out.stdout, out.stdout + out.stderr


def test_amtool_check_config_can_fail(tmp_path: Path) -> None:
    bad = tmp_path / "am.yaml"
    bad.write_text(ALERTMANAGER.read_text().replace("receiver: remediator", "receiver: nobody"))
    out = s.run([s.tool("amtool"), "check-config", str(bad)])
    assert out.returncode != 0


def test_alertmanager_posts_to_the_remediator_with_a_bearer_token() -> None:
    cfg = yaml.safe_load(ALERTMANAGER.read_text())
    hook = next(r for r in cfg["receivers"] if r["name"] == "remediator")["webhook_configs"][0]
    svc = s.find(s.render(s.DEPLOY / "base"), "Service", "remediator")
    port = svc["spec"]["ports"][0]["port"]
    ns = svc["metadata"]["namespace"]
    assert hook["url"] == f"http://remediator.{ns}.svc:{port}/events"
    assert hook["http_config"]["authorization"]["type"] == "Bearer"
    assert hook["send_resolved"] is True


def _dashboard_exprs() -> list[str]:
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs += [a["expr"] for a in dash["annotations"]["list"]]
    return exprs


def test_dashboard_queries_parse_and_use_known_series(tmp_path: Path) -> None:
    recorded = {
        r["record"]
        for g in yaml.safe_load(RULES.read_text())["groups"]
        for r in g["rules"]
        if "record" in r
    }
    names = EXPORTED | recorded
    rules = []
    for i, expr in enumerate(_dashboard_exprs()):
        concrete = (
            expr.replace("$__rate_interval", "5m")
            .replace("$__range", "6h")
            .replace("$namespace", ".*")
        ).replace("$model", ".*")
        rules.append({"record": f"dashboard:query:{i}", "expr": concrete})
        metric_like = set(re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*[{\[]", concrete))
        unknown = {m for m in metric_like if m not in names and m not in {"by", "without"}}
        assert not unknown, f"panel query uses unknown series {unknown}: {expr}"
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    _promtool("check", "rules", str(path))


def test_dashboard_has_the_three_views() -> None:
    dash = json.loads(DASHBOARD.read_text())
    types = {p["type"] for p in dash["panels"]}
    exprs = " ".join(_dashboard_exprs())
    assert "barchart" in types  # stacked bars per pod
    assert any(
        p["options"].get("stacking") == "normal" for p in dash["panels"] if p["type"] == "barchart"
    )
    assert "p95_1h" in exprs and "remediator_workflows_ended_total" in exprs
