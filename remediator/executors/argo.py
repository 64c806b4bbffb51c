"""Submit decisions as Argo Workflows and follow them to their end phase.

The runtime's surface is `carry(Submit | Poll) -> outcome` (executors/protocol.py);
`submit(decision) -> Submitted` and `track(name) -> Ended` are the same calls for
callers that want exceptions.
Talks to the Argo Server through the `argo_workflows` SDK, which is synchronous,
so each call runs in a worker thread. Responses are read as plain JSON rather
than through the SDK's generated models, which reject fields newer servers add.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import urllib3

# The SDK ships no type information (no py.typed).
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
from remediator.executors import argo_params
from remediator.executors.protocol import (
    Command,
    Ended,
    Outcome,
    Poll,
    Refused,
    Running,
    Submit,
    Submitted,
    Unavailable,
)
from remediator.executors.secrets import read_token
from remediator.executors.validate import InvalidParameter, dns1123_label, dns1123_subdomain
from remediator.logfields import get_logger

log = get_logger(__name__)

END_PHASES = frozenset({"Succeeded", "Failed", "Error"})
_GRPC_ALREADY_EXISTS = 6
_TRACK_FIELDS = ",".join(
    ["metadata.name", "status.phase", "status.message", "status.startedAt", "status.finishedAt"]
)

T = TypeVar("T")


class ArgoError(RuntimeError):
    """Argo refused or could not be reached; the message says which and why."""


class SubmitRejected(ArgoError):
    """A 4xx other than AlreadyExists: retrying the same request cannot help."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"Argo refused the request ({status}): {message}")
        self.status = status


class ArgoUnavailable(ArgoError):
    """5xx or no connection, still so after the bounded retries."""


class TrackTimeout(ArgoError):
    """The workflow did not reach an end phase in time; it may still be running."""


@dataclass(frozen=True, slots=True)
class ArgoConfig:
    host: str  # Argo Server base URL, e.g. https://argo-server.argo:2746
    namespace: str = "argo"  # where the WorkflowTemplates live and the Workflows run
    ui_url: str | None = None  # for links; defaults to host
    verify_ssl: bool = True
    ca_cert: str | None = None
    request_timeout_s: float = 10.0
    token_env: str = "ARGO_TOKEN"
    token_file_env: str = "ARGO_TOKEN_FILE"
    token_file: str | None = None  # a mounted secret; overrides $ARGO_TOKEN_FILE


@dataclass(frozen=True, slots=True)
class Backoff:
    """Bounded exponential backoff for retryable failures (5xx, connection)."""

    attempts: int = 4
    initial_s: float = 0.5
    factor: float = 2.0
    max_s: float = 8.0

    def delays(self) -> Iterator[float]:
        delay = self.initial_s
        for _ in range(self.attempts - 1):
            yield min(delay, self.max_s)
            delay *= self.factor


def _error_message(err: ApiException) -> str:
    """Argo's grpc-gateway body is {"code": N, "message": "..."}; fall back to the reason."""
    body = err.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        parsed = json.loads(body) if body else {}
    except ValueError:
        parsed = {}
    if isinstance(parsed, dict) and isinstance(parsed.get("message"), str):
        return str(parsed["message"])
    return str(err.reason or "no message")


def _grpc_code(err: ApiException) -> int | None:
    try:
        parsed = json.loads(err.body) if err.body else {}
    except (ValueError, TypeError):
        return None
    code = parsed.get("code") if isinstance(parsed, dict) else None
    return code if isinstance(code, int) else None


def _json(response: urllib3.HTTPResponse) -> dict[str, Any]:
    data = json.loads(response.data)
    if not isinstance(data, dict):
        raise ArgoError(f"Argo answered {type(data).__name__}, expected an object")
    return data


class ArgoExecutor:
    """Turns Decisions into Workflows from the WorkflowTemplates in `workflows/`."""

    def __init__(
        self, config: ArgoConfig, backoff: Backoff | None = None, poll_interval_s: float = 5.0
    ) -> None:
        dns1123_label("argo namespace", config.namespace)
        self._config = config
        self._backoff = backoff or Backoff()
        self._poll_interval_s = poll_interval_s
        self._api = WorkflowServiceApi(ApiClient(self._sdk_configuration()))

    def _sdk_configuration(self) -> Configuration:
        cfg = Configuration(host=self._config.host.rstrip("/"))
        cfg.verify_ssl = self._config.verify_ssl
        cfg.ssl_ca_cert = self._config.ca_cert
        cfg.api_key_prefix["BearerToken"] = "Bearer"
        cfg.api_key["BearerToken"] = self._token()  # fail fast when missing

        def refresh(c: Configuration) -> None:  # re-read: mounted tokens rotate
            c.api_key["BearerToken"] = self._token()

        cfg.refresh_api_key_hook = refresh
        return cfg

    def _token(self) -> str:
        return read_token(
            self._config.token_env, self._config.token_file_env, self._config.token_file
        )

    def url_for(self, name: str) -> str:
        base = (self._config.ui_url or self._config.host).rstrip("/")
        return f"{base}/workflows/{self._config.namespace}/{name}"

    async def carry(self, command: Command) -> Outcome:
        """Submit or Poll; every failure comes back as Unavailable or Refused."""
        try:
            if isinstance(command, Submit):
                return await self.submit(command.decision)
            if isinstance(command, Poll):
                return await self.poll(command.workflow)
        except ArgoUnavailable as exc:
            return Unavailable(str(exc))
        except SubmitRejected as exc:
            if exc.status == 401:  # a rotated token: the mounted file is re-read next time
                return Unavailable(str(exc), unauthorized=True)
            return Refused(str(exc))
        except (ArgoError, InvalidParameter) as exc:
            return Refused(str(exc))
        return Refused(f"Argo carries Submit and Poll, not {type(command).__name__}")

    async def submit(self, decision: Decision) -> Submitted:
        """Submit the decision's WorkflowTemplate under a name derived from the
        incident. A 409 AlreadyExists means an earlier submit got there: done."""
        template = argo_params.template_for(decision)
        name = argo_params.workflow_name(decision)
        request = IoArgoprojWorkflowV1alpha1WorkflowSubmitRequest(
            namespace=self._config.namespace,
            resource_kind="WorkflowTemplate",
            resource_name=template,
            submit_options=IoArgoprojWorkflowV1alpha1SubmitOpts(
                name=name,
                labels=argo_params.labels_for(decision),
                parameters=[f"{k}={val}" for k, val in argo_params.parameters_for(decision)],
            ),
        )
        fields = {"incident": decision.incident, "workflow": name, "template": template}
        try:
            response = await self._call(
                lambda: self._api.submit_workflow(
                    self._config.namespace,
                    request,
                    _preload_content=False,
                    _request_timeout=self._config.request_timeout_s,
                ),
                what=f"submit {template} as {name}",
                incident=decision.incident,
            )
        except ApiException as err:
            if err.status == 409 or _grpc_code(err) == _GRPC_ALREADY_EXISTS:
                log.info("workflow already exists, counted as done", extra=fields)
                return self._submitted(name, template, decision, created=False)
            raise SubmitRejected(err.status or 0, _error_message(err)) from None
        created = _json(response).get("metadata", {}).get("name", name)
        if created != name:
            raise ArgoError(f"Argo created {created!r}, expected {name!r}")
        log.info("workflow submitted", extra=fields)
        return self._submitted(name, template, decision, created=True)

    def _submitted(self, name: str, template: str, d: Decision, *, created: bool) -> Submitted:
        return Submitted(
            name=name,
            namespace=self._config.namespace,
            template=template,
            incident=d.incident,
            created=created,
            url=self.url_for(name),
        )

    async def track(self, name: str, timeout_s: float = 3600.0) -> Ended:
        """Poll the workflow until Succeeded, Failed or Error; TrackTimeout after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            seen = await self.poll(name)
            if isinstance(seen, Ended):
                return seen
            if time.monotonic() >= deadline:
                raise TrackTimeout(f"workflow {name} still {seen.phase} after {timeout_s:g}s")
            await asyncio.sleep(self._poll_interval_s)

    async def poll(self, name: str) -> Ended | Running:
        """One look at the workflow's phase."""
        dns1123_subdomain("workflow name", name)
        try:
            response = await self._call(
                lambda: self._api.get_workflow(
                    self._config.namespace,
                    name,
                    fields=_TRACK_FIELDS,
                    _preload_content=False,
                    _request_timeout=self._config.request_timeout_s,
                ),
                what=f"get workflow {name}",
                incident=None,
            )
        except ApiException as err:
            raise SubmitRejected(err.status or 0, _error_message(err)) from None
        status = _json(response).get("status") or {}
        phase = status.get("phase") or "Pending"
        if phase not in END_PHASES:
            return Running(name, phase, self.url_for(name))
        return Ended(
            name=name,
            phase=phase,
            message=status.get("message") or "",
            started_at=status.get("startedAt"),
            finished_at=status.get("finishedAt"),
            url=self.url_for(name),
        )

    async def _call(self, fn: Callable[[], T], *, what: str, incident: str | None) -> T:
        """Run one SDK call in a thread; retry 5xx and connection failures with
        bounded backoff; hand 4xx back to the caller as ApiException."""
        delays = self._backoff.delays()
        while True:
            try:
                return await asyncio.to_thread(fn)
            except ApiException as err:
                if not (err.status is not None and 500 <= err.status <= 599):
                    raise
                cause = f"{err.status}: {_error_message(err)}"
            except urllib3.exceptions.HTTPError as err:
                cause = type(err).__name__
            delay = next(delays, None)
            if delay is None:
                raise ArgoUnavailable(
                    f"{what}: gave up after {self._backoff.attempts} attempts ({cause})"
                ) from None
            log.warning(
                "argo call failed, retrying",
                extra={"incident": incident, "what": what, "cause": cause, "delay_s": delay},
            )
            await asyncio.sleep(delay)
