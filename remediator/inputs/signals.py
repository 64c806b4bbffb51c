"""remediator's own observations and an engine's log lines, as documents: FirstToken,
GpuMemoryVerdict and EngineLog (see `inputs.decode` for their shapes)."""

from __future__ import annotations

from remediator.inputs.records import JSON, EngineStep, FirstToken, GpuVerdict, InputError
from remediator.inputs.timefmt import parse_time, parse_time_or_none
from remediator.inputs.vllm_log import is_reprint, parse_line, vllm_clock


def first_token(doc: JSON) -> FirstToken:
    ns, pod, when = doc.get("namespace"), doc.get("pod"), doc.get("time")
    if not isinstance(ns, str) or not isinstance(pod, str) or not ns or not pod:
        raise InputError("FirstToken without namespace and pod")
    if not isinstance(when, str):
        raise InputError("FirstToken without time")
    uid = doc.get("uid")
    return FirstToken(ns, pod, uid if isinstance(uid, str) and uid else None, parse_time(when))


def engine_log(doc: JSON) -> EngineStep | None:
    """An EngineLog line → the step it marks; None for the many lines that mark nothing."""
    ns, pod, line = doc.get("namespace"), doc.get("pod"), doc.get("line")
    if not isinstance(ns, str) or not isinstance(pod, str) or not ns or not pod:
        raise InputError("EngineLog without namespace and pod")
    if not isinstance(line, str):
        raise InputError("EngineLog without line")
    when = doc.get("time")
    if when is None:
        when, _, line = line.partition(" ")  # the kubelet's prefix: "2025-04-06T07:55:21.1Z ..."
    if not isinstance(when, str):
        raise InputError("EngineLog without time")
    at = parse_time(when)  # ValueError: the caller reports the line as malformed
    mark = parse_line(line)
    if mark is None:
        return None
    uid = doc.get("uid")
    uid = uid if isinstance(uid, str) and uid else None
    logged, reprint = vllm_clock(line, at), is_reprint(line)  # Ray's late copies
    return EngineStep(ns, pod, uid, mark.step, mark.reported_s, mark.detail, at, logged, reprint)


def gpu_verdict(doc: JSON) -> GpuVerdict:
    node, stable = doc.get("node"), doc.get("stable")
    if not isinstance(node, str) or not node or not isinstance(stable, bool):
        raise InputError("GpuMemoryVerdict without node and boolean stable")
    incident = doc.get("incident")
    return GpuVerdict(
        node=node,
        stable=stable,
        detail=str(doc.get("detail") or ""),
        incident=incident if isinstance(incident, str) else None,
        at=parse_time_or_none(doc.get("time")),
    )
