"""A stand-in Argo Server: the submit and get endpoints, as the SDK calls them.

It checks what the client sends (path, Authorization, the submit body against
the schema and the WorkflowTemplate's declared parameters), builds the Workflow
Argo would create from the template and validates it against the published
schema, then answers as Argo's grpc-gateway does: the Workflow on success,
`{"code": 6, ...}` with 409 for a duplicate name, injected 5xx on demand.
Each GET advances a workflow one phase along its script
(Pending -> Running -> Succeeded by default).
"""

from __future__ import annotations

import copy
import functools
import json
import re
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jsonschema  # type: ignore[import-untyped]
import yaml

from tests.data import SCHEMAS
from tests.sharing import own_copy
from tests.standins.loopback import LoopbackServer

REPO = Path(__file__).resolve().parents[2]
SCHEMA_PATH = SCHEMAS / "argo-workflows-schema.json"
WORKFLOWS_DIR = REPO / "workflows"

_DNS1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_KEY = re.compile(r"([a-z0-9.-]{1,253}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
_PARAM_REF = re.compile(r"\{\{\s*workflow\.parameters\.([A-Za-z0-9_-]+)\s*\}\}")


def relaxed_schema() -> dict[str, Any]:
    """The published schema with the one relaxation tests/data/README.md records:
    IntOrString also accepts integers (Argo does, e.g. retryStrategy.limit: 3). A fresh copy:
    the caller may change it."""
    return own_copy(_relaxed_schema())


@functools.cache
def _relaxed_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
    schema["definitions"]["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] = {
        "type": ["string", "integer"]
    }
    return schema


@functools.cache
def validator() -> jsonschema.protocols.Validator:
    schema = _relaxed_schema()
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


@functools.cache
def _definition_validator(name: str) -> jsonschema.protocols.Validator:
    schema = {
        "$ref": f"#/definitions/io.argoproj.workflow.v1alpha1.{name}",
        "definitions": _relaxed_schema()["definitions"],
    }
    return jsonschema.Draft202012Validator(schema)


def load_templates(directory: Path = WORKFLOWS_DIR) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(directory.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "WorkflowTemplate":
                out[doc["metadata"]["name"]] = doc
    return out


def _substitute(node: Any, params: dict[str, str]) -> Any:
    if isinstance(node, str):
        return _PARAM_REF.sub(lambda m: params.get(m.group(1), m.group(0)), node)
    if isinstance(node, list):
        return [_substitute(x, params) for x in node]
    if isinstance(node, dict):
        return {k: _substitute(x, params) for k, x in node.items()}
    return node


def _pick(doc: dict[str, Any], fields: str) -> dict[str, Any]:
    """Argo's `fields` query: keep only the listed dotted paths."""
    out: dict[str, Any] = {}
    for path in fields.split(","):
        src: Any = doc
        parts = path.strip().split(".")
        for part in parts:
            src = src.get(part) if isinstance(src, dict) else None
        if src is None:
            continue
        dst = out
        for part in parts[:-1]:
            dst = dst.setdefault(part, {})
        dst[parts[-1]] = src
    return out


class Refused(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass
class Recorded:
    method: str
    path: str
    authorization: str | None
    body: Any


@dataclass
class ArgoStandin:
    token: str
    templates: dict[str, dict[str, Any]] = field(default_factory=load_templates)
    submit_status: int = 200  # argo-server's grpc-gateway answers 200 to a submit
    default_script: tuple[str, ...] = ("Pending", "Running", "Succeeded")
    requests: list[Recorded] = field(default_factory=list)
    workflows: dict[str, dict[str, Any]] = field(default_factory=dict)
    submitted_at: dict[str, float] = field(default_factory=dict)  # name → time.time() (benches)
    problems: list[str] = field(default_factory=list)  # what a real server would reject
    _faults: deque[int] = field(default_factory=deque)
    _scripts: dict[str, deque[tuple[str, str]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: LoopbackServer | None = None

    # -- scripting -------------------------------------------------------------
    def fail_next(self, *statuses: int) -> None:
        """The next requests answer these statuses (e.g. 503, 502) before normal service."""
        self._faults.extend(statuses)

    def script(self, name: str, *phases: str, message: str = "") -> None:
        """Phases the named workflow walks through, one per GET; the last one sticks."""
        self._scripts[name] = deque(
            (p, message if p in ("Failed", "Error") else "") for p in phases
        )

    # -- server ----------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.port}"

    def __enter__(self) -> ArgoStandin:
        self._server = LoopbackServer(_handler(self))
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    # -- behaviour -------------------------------------------------------------
    def handle(self, method: str, raw_path: str, auth: str | None, body: bytes) -> tuple[int, Any]:
        split = urlsplit(raw_path)
        parsed = json.loads(body) if body else None
        with self._lock:
            self.requests.append(Recorded(method, split.path, auth, parsed))
            try:
                if auth != f"Bearer {self.token}":
                    raise Refused(401, 16, "token not valid")
                if self._faults:
                    status = self._faults.popleft()
                    raise Refused(status, 14, f"injected {status}")
                return self._route(method, split.path, parse_qs(split.query), parsed)
            except Refused as r:
                return r.status, {"code": r.code, "message": r.message}

    def _route(
        self, method: str, path: str, query: dict[str, list[str]], body: Any
    ) -> tuple[int, Any]:
        m = re.fullmatch(r"/api/v1/workflows/([^/]+)/submit", path)
        if method == "POST" and m:
            return self.submit_status, self._submit(m.group(1), body)
        m = re.fullmatch(r"/api/v1/workflows/([^/]+)/([^/]+)", path)
        if method == "GET" and m:
            wf = self._advance(m.group(1), m.group(2))
            fields = query.get("fields", [""])[0]
            return 200, _pick(wf, fields) if fields else wf
        raise Refused(404, 5, f"no route for {method} {path}")

    def _submit(self, namespace: str, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise Refused(400, 3, "body must be a JSON object")
        problems = [
            e.message for e in _definition_validator("WorkflowSubmitRequest").iter_errors(body)
        ]
        unknown = set(body) - {"namespace", "resourceKind", "resourceName", "submitOptions"}
        if problems or unknown:
            raise Refused(400, 3, f"bad submit body: {problems or sorted(unknown)}")
        if body.get("namespace") != namespace:
            raise Refused(
                400, 3, f"namespace in body {body.get('namespace')!r} != path {namespace!r}"
            )
        if body.get("resourceKind") != "WorkflowTemplate":
            raise Refused(400, 3, f"resourceKind {body.get('resourceKind')!r} not supported")
        template = self.templates.get(body.get("resourceName", ""))
        if template is None:
            raise Refused(
                404, 5, f'workflowtemplates.argoproj.io "{body.get("resourceName")}" not found'
            )
        opts = body.get("submitOptions") or {}
        name = opts.get("name", "")
        if not (0 < len(name) <= 63 and _DNS1123.fullmatch(name)):
            raise Refused(400, 3, f"invalid workflow name {name!r}")
        if name in self.workflows:
            raise Refused(409, 6, f'workflows.argoproj.io "{name}" already exists')
        wf = self._workflow(namespace, name, template, opts)
        self.workflows[name] = wf
        self.submitted_at[name] = time.time()
        self._scripts.setdefault(name, deque((p, "") for p in self.default_script))
        return wf

    def _workflow(
        self, ns: str, name: str, tmpl: dict[str, Any], opts: dict[str, Any]
    ) -> dict[str, Any]:
        labels = self._labels(opts.get("labels", ""))
        labels["workflows.argoproj.io/workflow-template"] = tmpl["metadata"]["name"]
        params = self._parameters(tmpl, opts.get("parameters") or [])
        spec = copy.deepcopy(tmpl["spec"])
        spec["arguments"] = {"parameters": [{"name": k, "value": v} for k, v in params.items()]}
        wf = {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Workflow",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": labels,
                "uid": f"wf-{len(self.workflows)}",
            },
            "spec": {
                "workflowTemplateRef": {"name": tmpl["metadata"]["name"]},
                "arguments": spec["arguments"],
            },
            "status": {"phase": "", "storedWorkflowTemplateSpec": _substitute(spec, params)},
        }
        problems = [f"{list(e.absolute_path)}: {e.message}" for e in validator().iter_errors(wf)]
        if problems:
            self.problems.extend(problems)
            raise Refused(400, 3, f"generated Workflow is invalid: {problems[:3]}")
        return wf

    @staticmethod
    def _labels(text: str) -> dict[str, str]:
        labels: dict[str, str] = {}
        for item in filter(None, text.split(",")):
            key, sep, value = item.partition("=")
            if not sep or not _LABEL_KEY.fullmatch(key) or not _LABEL_VALUE.fullmatch(value):
                raise Refused(400, 3, f"invalid label {item!r}")
            labels[key] = value
        return labels

    @staticmethod
    def _parameters(tmpl: dict[str, Any], given: list[str]) -> dict[str, str]:
        declared = {
            p["name"]: p.get("value")
            for p in tmpl["spec"].get("arguments", {}).get("parameters", [])
        }
        values: dict[str, str] = {}
        for item in given:
            key, sep, value = item.partition("=")
            if not sep:
                raise Refused(400, 3, f"parameter {item!r} is not name=value")
            if key not in declared:
                raise Refused(400, 3, f"parameter {key!r} is not declared by the template")
            values[key] = value
        merged = {k: values.get(k, v) for k, v in declared.items()}
        missing = [k for k, v in merged.items() if v is None]
        if missing:
            raise Refused(400, 3, f"spec.arguments.{missing[0]}.value is required")
        return {k: str(v) for k, v in merged.items()}

    def _advance(self, ns: str, name: str) -> dict[str, Any]:
        wf = self.workflows.get(name)
        if wf is None or wf["metadata"]["namespace"] != ns:
            raise Refused(404, 5, f'workflows.argoproj.io "{name}" not found')
        script = self._scripts[name]
        phase, message = script.popleft() if len(script) > 1 else script[0]
        status = wf["status"]
        status["phase"] = phase
        if phase != "Pending":
            status.setdefault("startedAt", "2024-05-01T10:00:00Z")
        if phase in ("Succeeded", "Failed", "Error"):
            status.setdefault("finishedAt", "2024-05-01T10:01:30Z")
        if message:
            status["message"] = message
        return wf

    def submitted(self) -> Iterator[Recorded]:
        return (r for r in self.requests if r.path.endswith("/submit"))


def _handler(standin: ArgoStandin) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            status, payload = standin.handle(
                self.command, self.path, self.headers.get("Authorization"), body
            )
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _serve  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # keep test output clean

    return Handler
