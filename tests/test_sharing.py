"""Builders can't leak: changing what one built, anywhere in it, leaves the next build as it was.

Issue 17: `streams.pod()` put the module-level `VLLM_ARGS` list into every pod; a property test
that replaced a field of a built pod in place rewrote it for every later test. Each builder here
is built, its result vandalized (every list and dict in it changed in place), and built again.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.data import vllm_logs
from tests.policy import builders as policy
from tests.sharing import GlobalsWatch, fresh, own_copy
from tests.simstream import pods as simstream_pods
from tests.simstream.plan import Planner
from tests.standins import kube_api
from tests.timeline import streams

BUILDERS: dict[str, Callable[[], Any]] = {
    "streams.pod": lambda: streams.pod(scheduled=12, started=289, ready=525),
    "streams.pod(waiting)": lambda: streams.pod(scheduled=12, waiting="ContainerCreating"),
    "streams.event": lambda: streams.event("Pulled", streams.pulled("3m2s"), 195),
    "streams.new_event": lambda: streams.new_event("Pulling", "pulling", 13, series=(2, 14)),
    "streams.first_token": lambda: streams.first_token(530, uid=streams.UID),
    "streams.cloudevent": lambda: streams.cloudevent({"pod": streams.POD}),
    "streams.cold_start": streams.cold_start,
    "policy.pod": lambda: policy.pod(scheduled=1, started=30),
    "policy.event": lambda: policy.event("Pulled", "pulled", 20),
    "policy.alert": lambda: policy.alert("firing", {"pod": "p"}, 0),
    "policy.deployment": lambda: policy.deployment("vllm:v2"),
    "kube_api.node": lambda: kube_api.node("gpu-node-1"),
    "kube_api.lease": lambda: kube_api.lease("remediator", "leader", holderIdentity="a"),
    "vllm_logs.engine_log": lambda: vllm_logs.engine_log("llm", "p", "INFO line", 0.0, "u"),
    "simstream.pod_object": lambda: simstream_pods.pod_object(
        Planner(seed=7).next(0, scenario="cold"), "ready", 12
    ),
}


def vandalize(doc: Any) -> None:
    """Change every list and dict in `doc` in place, innermost first."""
    if isinstance(doc, dict):
        for value in doc.values():
            vandalize(value)
        for key in list(doc):
            doc[key] = None
        doc["vandalized"] = True
    elif isinstance(doc, list):
        for value in doc:
            vandalize(value)
        doc[:] = [None]


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_changing_a_built_document_leaves_the_next_one_unchanged(name: str) -> None:
    build = BUILDERS[name]
    first = build()
    expected = repr(first)
    vandalize(first)
    assert repr(build()) == expected


def test_a_pod_shares_nothing_with_the_arguments_it_was_given() -> None:
    args, labels = ["--model", "m"], {"app": "vllm"}
    built = streams.pod(args=args, labels=labels)
    built["spec"]["containers"][1]["args"].append("--x")
    built["metadata"]["labels"]["app"] = "other"
    assert (args, labels) == (["--model", "m"], {"app": "vllm"})


def test_the_pod_constants_cannot_be_changed_in_place() -> None:
    with pytest.raises(TypeError):
        streams.VLLM_ARGS[0] = None  # type: ignore[index]
    with pytest.raises(TypeError):
        streams.COLD_START["scheduling"] = 0.0  # type: ignore[index]


def test_fresh_copies_share_no_list_or_dict_even_within_one_result() -> None:
    shared: list[int] = [1]

    @fresh
    def build() -> dict[str, Any]:
        return {"a": shared, "b": shared}

    built = build()
    built["a"].append(2)
    assert (built["b"], shared) == ([1], [1])
    assert own_copy(("x", [1])) == ("x", [1])


def test_the_watch_names_a_module_level_value_changed_in_place() -> None:
    module = types.ModuleType("tests._watched_probe")
    module.__file__ = str(Path(__file__).parent / "_watched_probe.py")
    module.DATA = {"args": ["--model"]}  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    try:
        watch = GlobalsWatch(Path(__file__).parent)
        assert watch.check() == []
        module.DATA["args"][0] = None  # type: ignore[attr-defined]
        changed = watch.check()
        assert changed == ["tests._watched_probe.DATA changed in place; now {'args': [None]}"]
        assert watch.check() == []  # named once, by the test that changed it
        module.DATA = {"rebound": True}  # type: ignore[attr-defined]
        assert watch.check() == []  # a new object is not a change in place
    finally:
        del sys.modules[module.__name__]
