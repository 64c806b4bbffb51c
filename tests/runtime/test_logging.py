"""Every log call on the service's main path works at INFO and at DEBUG.

The default test run keeps `remediator` at WARNING, where an INFO call with a reserved
`extra=` key (`created`, `msg`, `name`...) never builds its record and so never raises;
in production at INFO it raised KeyError in the submit task ("Task exception was never
retrieved") and the Slack message came a poll late. Every test in tests/runtime and
tests/sources also runs with logging at DEBUG (conftest), failing on any logging error."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

from remediator.logfields import RESERVED, field_name, get_logger
from remediator.runtime.service import ServiceConfig
from tests.logcheck import strict_logging
from tests.runtime.conftest import running, stuck_pod, wait_until
from tests.standins.argo_server import ArgoStandin
from tests.standins.kube_api import KubeApiServer
from tests.standins.slack_server import SlackStandin

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("level", [logging.INFO, logging.DEBUG], ids=["INFO", "DEBUG"])
async def test_the_stuck_pod_path_logs_cleanly(
    level: int,
    config: ServiceConfig,
    kube: KubeApiServer,
    argo: ArgoStandin,
    slack: SlackStandin,
) -> None:
    kube.store.create(stuck_pod())
    with strict_logging(level) as logs:
        async with running(config) as service:
            await wait_until(
                lambda: [r for r in service.outbox.rows() if r.state == "ended"], what="ended"
            )
            await wait_until(lambda: len(slack.posted()) >= 2, what="act and end told")
    assert logs.problems() == []
    (submitted,) = logs.named("outbox row submitted")
    assert submitted["workflow"] == next(iter(argo.workflows))
    assert submitted["incident"] and submitted["ts"].endswith("+00:00")
    # the act message was posted on the first poll after the submit, not "(already submitted)"
    assert "already submitted" not in slack.posted()[0].body["text"]
    for line in logs.lines:  # the JSON line's own keys are never a caller's field
        assert isinstance(line["ts"], str) and line["ts"].endswith("+00:00")


def test_reserved_fields_are_renamed_in_one_place() -> None:
    """A caller's field that collides with a LogRecord attribute or a line key is renamed,
    never a KeyError and never an overwritten `ts`."""
    log = get_logger("remediator.test")
    with strict_logging(logging.DEBUG) as logs:
        log.info("fields", extra={"created": 1, "msg": "x", "ts": "1.2", "name": "n", "ok": 2})
    assert logs.problems() == []
    (line,) = logs.named("fields")
    assert line["ok"] == 2
    assert [line[field_name(k)] for k in ("created", "msg", "ts", "name")] == [1, "x", "1.2", "n"]
    assert {"created", "msg", "ts", "name", "levelname", "message", "asctime"} <= RESERVED


def _field_keys(call: ast.Call) -> list[str]:
    """Literal field names a log call passes: `extra={...}` and steps' `log(msg, **fields)`."""
    keys = [kw.arg for kw in call.keywords if kw.arg] if _called(call) == "log" else []
    for kw in call.keywords:
        if kw.arg == "extra" and isinstance(kw.value, ast.Dict):
            keys += [k.value for k in kw.value.keys if isinstance(k, ast.Constant)]
    return [k for k in keys if k not in ("level", "extra", "exc_info", "stacklevel")]


def _called(call: ast.Call) -> str:
    return call.func.id if isinstance(call.func, ast.Name) else ""


def test_no_log_call_names_a_reserved_field() -> None:
    """Renaming is the safety net; our own calls choose names that never need it."""
    hits = [
        f"{path.relative_to(REPO)}:{node.lineno} {key}"
        for path in sorted((REPO / "remediator").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        for key in _field_keys(node)
        if key in RESERVED
    ]
    assert hits == []


def test_a_field_holding_bytes_that_were_not_utf8_is_still_one_json_line() -> None:
    """aiohttp keeps a header's non-UTF-8 bytes as lone surrogates; a log line quoting one
    was a logging traceback (issue 18 #9), now it is written with the byte escaped."""
    with strict_logging(logging.INFO) as logs:
        get_logger("remediator.test").warning("quoted", extra={"header": "1.0\udcff"})
    assert logs.problems() == []
    assert logs.named("quoted")[0]["header"] == "1.0\\udcff"  # escaped, never dropped


def test_a_field_keyed_by_numbers_is_still_one_json_line() -> None:
    """A step's sample logs its GPUs' memory keyed by GPU index (ints): through the runtime's
    formatter (a step run in-process where serve had set up logging) that was a logging
    traceback, and the step's own output was lost with it."""
    with strict_logging(logging.INFO) as logs:
        get_logger("remediator.test").warning("sample", extra={"used_mib": {0: 1, 1: 2}})
    assert logs.problems() == []
    assert logs.named("sample")[0]["used_mib"] == {"0": 1, "1": 2}
