"""Every real start-up log in tests/data/vllm_logs, replayed through the decoder and the
engine-steps record: the marks, steps, current step and details its expected.toml entry gives
(checked by hand against the lines), and the provenance the README records for it."""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any

import orjson
import pytest

from remediator.inputs.decode import decode
from remediator.inputs.records import EngineStep
from remediator.timeline.engine_steps import EngineSteps
from tests.data import vllm_logs

EXPECTED = vllm_logs.expected()


def _items(name: str) -> list[EngineStep]:
    items = [i for doc in vllm_logs.replay(name) for i in decode(orjson.dumps(doc))]
    assert all(isinstance(i, EngineStep) for i in items)
    return [i for i in items if isinstance(i, EngineStep)]


def _mark(item: EngineStep) -> str:
    parts = [item.step]
    if item.reported_s is not None or item.detail:
        parts.append("-" if item.reported_s is None else repr(item.reported_s))
    if item.detail:
        parts.append(item.detail)
    return " | ".join(parts)


def _record(items: list[EngineStep]) -> dict[str, Any]:
    steps = EngineSteps()
    for item in items:
        steps.see(item)
    return {
        "steps": steps.durations(None, None),
        "current": steps.current(None),
        "detail": dict(sorted(steps.detail.items())),
    }


def test_every_log_has_its_expectations() -> None:
    assert sorted(EXPECTED) == vllm_logs.files()
    assert len(EXPECTED) >= 20


def test_every_log_says_where_it_is_from_and_the_readme_has_its_sha256() -> None:
    readme = (vllm_logs.HERE / "README.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([^`]+\.log)` \| .* \| `([0-9a-f]{64})` \|$", readme, re.M))
    assert sorted(rows) == vllm_logs.files()
    for name in vllm_logs.files():
        data = (vllm_logs.HERE / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == rows[name], name
        first = data.decode("utf-8").splitlines()[0]
        assert re.match(r"# source: https://github\.com/\S+/(issues|pull)/\d+ \(vLLM ", first), name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_real_log_gives_its_steps(name: str) -> None:
    items = _items(name)
    want = EXPECTED[name]
    assert [_mark(i) for i in items] == want["marks"]
    got = _record(items)
    assert got["steps"] == want["steps"]
    assert got["current"] == want["current"]
    assert got["detail"] == want["detail"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_real_log_gives_the_same_steps_in_any_order(name: str) -> None:
    items = _items(name)
    want = _record(items)
    for seed in range(5):
        shuffled = items[:]
        random.Random(seed).shuffle(shuffled)
        assert _record(shuffled) == want, seed
