"""What the user names → which pods are listed."""

from __future__ import annotations

import pytest

from remediator.coldstart.target import Target, TargetError, parse_target, selector_of


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("vllm-0", Target("pod", "vllm-0")),
        ("pod/vllm-0", Target("pod", "vllm-0")),
        ("deploy/llama", Target("deployment", "llama")),
        ("deployments/llama", Target("deployment", "llama")),
        ("deployment.apps/llama", Target("deployment", "llama")),
        ("sts/llama", Target("statefulset", "llama")),
        ("StatefulSet/llama", Target("statefulset", "llama")),
        (None, Target()),
    ],
)
def test_kubectl_spellings(text: str | None, want: Target) -> None:
    assert parse_target(text, None) == want


@pytest.mark.parametrize(
    ("text", "selector", "says"),
    [
        ("svc/llama", None, "name a pod, deploy/NAME or sts/NAME"),
        ("deploy/", None, "expected deploy/NAME"),
        ("deploy/a/b", None, "expected deploy/NAME"),
        ("vllm-0", "app=x", "not both"),
        (None, " ", "-l needs a label selector"),
    ],
)
def test_what_cannot_be_shown_is_said(text: str | None, selector: str | None, says: str) -> None:
    with pytest.raises(TargetError, match=says):
        parse_target(text, selector)


def test_labels() -> None:
    assert parse_target("deploy/llama", None).label == "deploy/llama"
    assert parse_target(None, "app=x").label == "-l app=x"
    assert parse_target(None, None).label == "all pods"


def test_a_workload_selector_in_every_operator() -> None:
    workload = {
        "spec": {
            "selector": {
                "matchLabels": {"app": "vllm", "tier": "gpu"},
                "matchExpressions": [
                    {"key": "model", "operator": "In", "values": ["a", "b"]},
                    {"key": "zone", "operator": "NotIn", "values": ["x"]},
                    {"key": "gpu", "operator": "Exists"},
                    {"key": "canary", "operator": "DoesNotExist"},
                ],
            }
        }
    }
    assert selector_of(workload) == "app=vllm,tier=gpu,model in (a,b),zone notin (x),gpu,!canary"


def test_an_empty_selector_is_refused_not_taken_as_everything() -> None:
    with pytest.raises(TargetError, match="empty"):
        selector_of({"spec": {"selector": {}}})
