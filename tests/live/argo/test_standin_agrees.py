"""The same argo-workflows SDK requests to the real Argo Server and to the stand-in
(tests/standins/argo_server.py), answers compared: HTTP status and grpc code. Where they differ,
the case says what the real server does; the stand-in keeps its use for what the real server
cannot do on request (5xx on demand, scripted phases, no cluster needed)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from argo_workflows.api.workflow_service_api import WorkflowServiceApi  # type: ignore[import-untyped]
from argo_workflows.api_client import ApiClient  # type: ignore[import-untyped]
from argo_workflows.configuration import Configuration  # type: ignore[import-untyped]
from argo_workflows.exceptions import ApiException  # type: ignore[import-untyped]
from argo_workflows.model.io_argoproj_workflow_v1alpha1_submit_opts import (  # type: ignore[import-untyped]
    IoArgoprojWorkflowV1alpha1SubmitOpts,
)
from argo_workflows.model.io_argoproj_workflow_v1alpha1_workflow_submit_request import (  # type: ignore[import-untyped]
    IoArgoprojWorkflowV1alpha1WorkflowSubmitRequest,
)

from remediator.contract.decision import Decision
from remediator.executors.argo import ArgoConfig, ArgoExecutor, SubmitRejected
from remediator.executors.validate import InvalidParameter
from tests.live.harness import LiveCluster
from tests.standins.argo_server import ArgoStandin

Answer = tuple[int, int | None]  # HTTP status, grpc code (None on success)
TEMPLATE = "delete-stuck-inference-pod"
GOOD = {
    "namespace": "llm-inference",
    "pod": "vllm-agree-0",
    "uid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
    "workload": "llm-inference.deployment.vllm-agree",
    "incident": "agree",
    "reason": "engine_init 75s > budget 60s",
}


@dataclass
class Server:
    host: str
    token: str  # the remediator's
    other: str  # a valid token of an identity with no Role in `argo`

    def api(self, token: str | None = None) -> WorkflowServiceApi:
        cfg = Configuration(host=self.host)
        cfg.api_key_prefix["BearerToken"] = "Bearer"
        cfg.api_key["BearerToken"] = token or self.token
        return WorkflowServiceApi(ApiClient(cfg))


def answer(fn: Callable[[], Any]) -> Answer:
    try:
        fn()
        return 200, None
    except ApiException as err:
        try:
            code = json.loads(err.body or b"{}").get("code")
        except ValueError:
            code = None
        return err.status, code


def submit(
    s: Server,
    params: list[str],
    *,
    name: str = "",
    namespace: str = "argo",
    template: str = TEMPLATE,
    labels: str = "",
    token: str | None = None,
) -> Answer:
    opts: dict[str, Any] = {"name": name or fresh(), "parameters": params}
    if labels:
        opts["labels"] = labels
    req = IoArgoprojWorkflowV1alpha1WorkflowSubmitRequest(
        namespace=namespace,
        resource_kind="WorkflowTemplate",
        resource_name=template,
        submit_options=IoArgoprojWorkflowV1alpha1SubmitOpts(**opts),
    )
    api = s.api(token)
    return answer(lambda: api.submit_workflow(namespace, req, _preload_content=False))


def fresh() -> str:
    return f"agree-{uuid.uuid4().hex[:10]}"


def good(**changes: str | None) -> list[str]:
    merged = {**GOOD, **changes}
    return [f"{k}={v}" for k, v in merged.items() if v is not None]


@dataclass(frozen=True)
class Case:
    request: Callable[[Server], Answer]
    real: Answer
    standin: Answer


def _twice(s: Server) -> Answer:
    name = fresh()
    assert submit(s, good(), name=name) == (200, None)
    return submit(s, good(), name=name)


CASES = {
    "a duplicate name is 409 AlreadyExists": Case(_twice, (409, 6), (409, 6)),
    "a parameter without a value is refused": Case(
        lambda s: submit(s, good(uid=None)), (400, 3), (400, 3)
    ),
    "an unknown template is NotFound": Case(
        lambda s: submit(s, good(), template="no-such-template"), (404, 5), (404, 5)
    ),
    "an invalid name is refused": Case(
        lambda s: submit(s, good(), name="Bad_Name"), (400, 3), (400, 3)
    ),
    "an invalid label value is refused": Case(
        lambda s: submit(s, good(), labels="remediator.io/incident=has space"), (400, 3), (400, 3)
    ),
    "get of an unknown workflow is NotFound": Case(
        lambda s: answer(lambda: s.api().get_workflow("argo", fresh(), _preload_content=False)),
        (404, 5),
        (404, 5),
    ),
    "a token the API server does not know is Unauthenticated": Case(
        lambda s: submit(s, good(), token="not-a-token"), (401, 16), (401, 16)
    ),
    # Differences. The real server accepts a parameter the template does not declare (and the
    # Workflow runs): the executor's own refusal is the only guard (see the test below).
    "DIFFERS an undeclared parameter": Case(
        lambda s: submit(s, [*good(), "bogus=1"]), (200, None), (400, 3)
    ),
    # A parameter without '=' is a 500 Internal from the real server, which the executor
    # would retry as "Argo unavailable"; it never sends one (argo_params builds name=value).
    "DIFFERS a parameter without '='": Case(
        lambda s: submit(s, [*good(), "bogus"]), (500, 13), (400, 3)
    ),
    # Templates are namespaced: none in `default`. The stand-in knows one set for any namespace.
    "DIFFERS a namespace without the templates": Case(
        lambda s: submit(s, good(), namespace="default"), (404, 5), (200, None)
    ),
    # Client auth mode: a valid token of an identity RBAC grants nothing is PermissionDenied
    # (the API server's 403, passed through); the stand-in only knows its one token (401).
    "DIFFERS an identity without the Role": Case(
        lambda s: submit(s, good(), token=s.other), (403, 7), (401, 16)
    ),
}


@pytest.fixture(scope="module")
def servers(
    cluster: LiveCluster, real_argo: Any, argo_token: str
) -> Iterator[tuple[Server, Server]]:
    sa = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "no-role", "namespace": "argo"},
    }
    cluster.apply([sa])
    other = str(cluster.raw.token("argo", "no-role"))
    real = Server(real_argo.server_url, argo_token, other)
    _until_served(real)
    with ArgoStandin(token=argo_token) as standin:
        yield real, Server(standin.url, argo_token, other)
    # What the real submits started: their Workflows (and, through ownership, their pods).
    path = "/apis/argoproj.io/v1alpha1/namespaces/argo/workflows"
    for wf in cluster.api("GET", path)["items"]:
        if wf["metadata"]["name"].startswith("agree-"):
            cluster.delete(f"{path}/{wf['metadata']['name']}")


def _until_served(s: Server, timeout_s: float = 60.0) -> None:
    """Until the real server answers the remediator's token, and one it cannot know, with
    something other than 503 Unavailable. It is up once it serves its own ServiceAccount
    (tests/cluster/argo.py), but a caller's token is reviewed by the API server per request:
    on a loaded machine the first reviews time out, and it answers 503 (grpc Unavailable),
    which the executor retries and these cases would take for its answer."""
    deadline = time.monotonic() + timeout_s
    probe = f"readiness-{uuid.uuid4().hex[:8]}"
    while True:
        answers = [answer(lambda t=t: s.api(t).get_workflow("argo", probe, _preload_content=False))
                   for t in (None, "not-a-token")]  # fmt: skip
        if all(status != 503 for status, _ in answers):
            return
        if time.monotonic() > deadline:
            pytest.fail(f"the real Argo Server still answers {answers} after {timeout_s:.0f}s")
        time.sleep(0.5)


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_real_and_standin_answers(servers: tuple[Server, Server], case: Case) -> None:
    real, standin = servers
    assert (case.request(real), case.request(standin)) == (case.real, case.standin)


async def test_the_executor_refuses_an_undeclared_parameter_before_argo_would_accept_it(
    servers: tuple[Server, Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    real, _ = servers
    monkeypatch.setenv("ARGO_TOKEN", real.token)
    executor = ArgoExecutor(ArgoConfig(host=real.host, namespace="argo"))
    decision = Decision(
        action="delete-pod",
        namespace="llm-inference",
        target="vllm-agree-0",
        reason="engine_init 75s > budget 60s",
        incident="agree-undeclared",
        at=0.0,
        uid=GOOD["uid"],
        workload="llm-inference/Deployment/vllm-agree",
        params=(("bogus", "1"),),
    )
    with pytest.raises(InvalidParameter, match="bogus"):
        await executor.submit(decision)


async def test_an_identity_without_the_role_is_a_403_the_executor_does_not_retry(
    servers: tuple[Server, Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    real, _ = servers
    monkeypatch.setenv("ARGO_TOKEN", real.other)
    executor = ArgoExecutor(ArgoConfig(host=real.host, namespace="argo"))
    decision = Decision(
        action="delete-pod",
        namespace="llm-inference",
        target="vllm-agree-1",
        reason="engine_init 75s > budget 60s",
        incident="agree-forbidden",
        at=0.0,
        uid=GOOD["uid"],
        workload="llm-inference/Deployment/vllm-agree",
    )
    with pytest.raises(SubmitRejected) as err:
        await executor.submit(decision)
    assert err.value.status == 403 and "cannot create resource" in str(err.value)
