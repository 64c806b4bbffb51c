"""Raw bytes → normalised input records. The one entry point of the core for data.

Understands, at any nesting a real pipeline produces:
  - Kubernetes watch events {"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object": {...}},
    a MODIFIED optionally with its "oldObject" (what the object was before the update)
  - bare objects and Lists (PodList, EventList, ...) as `kubectl get -o json` prints them
  - Alertmanager webhook payloads (version 4)
  - CloudEvents 1.0 in structured JSON whose data is any of the above, including Argo Events'
    envelopes ({"header", "body"} from a webhook source, {"type": ADD|UPDATE|DELETE, "body"}
    from a resource source)
  - remediator's own observations: {"kind": "FirstToken"...} and {"kind": "GpuMemoryVerdict"...}
  - an inference pod's log line: {"kind": "EngineLog", "namespace", "pod", "uid"?, "time"?,
    "line"}; "time" may instead lead the line as the kubelet writes it (`--timestamps`)
  - a vLLM start-up span: {"kind": "EngineSpan", "namespace", "pod", "uid"?, "name",
    "start_ns", "end_ns"}, and a list of them ({"kind": "EngineSpanList", "items"}), as
    serve's /v1/traces stores OTLP bodies (inputs.otlp)
"""

from __future__ import annotations

from typing import Any, cast

import msgspec
import orjson

from remediator.inputs.alerts import alerts_seen
from remediator.inputs.events import pod_event
from remediator.inputs.kinds import DECODERS
from remediator.inputs.pods import pod_seen
from remediator.inputs.records import JSON, Input, InputError, WatchType
from remediator.inputs.schema import POD_WATCH, Event, Pod

_WATCH_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})
_WATCH_TYPE: dict[str, WatchType] = {"ADDED": "ADDED", "MODIFIED": "MODIFIED", "DELETED": "DELETED"}
_ARGO_RESOURCE_TYPES: dict[str, WatchType] = {
    "ADD": "ADDED",
    "UPDATE": "MODIFIED",
    "DELETE": "DELETED",
}
_MAX_DEPTH = 4
# Workload kinds (and what `kubectl get all` adds) the core has no use for: recognised
# and skipped, never "malformed". Anything else unknown is still an error.
IGNORED_KINDS = frozenset(
    {
        "ReplicaSet", "ReplicationController", "ControllerRevision", "Job", "CronJob",
        "HorizontalPodAutoscaler", "PodDisruptionBudget", "Service", "Endpoints",
        "EndpointSlice",
    }
)  # fmt: skip


def decode(raw: bytes | str) -> list[Input]:
    """Decode one JSON document. Raises InputError, with a reason, on anything unknown.

    A Pod or Event watch line (nearly every line of a live stream) is decoded straight
    into typed structs; everything else takes the general path."""
    try:
        watch = POD_WATCH.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        pass  # not a Pod/Event watch line, or bad: the general path says which
    else:
        try:
            return _typed(watch.type, watch.object)
        except ValueError as exc:  # a timestamp that is not one: bad input, not our bug
            if isinstance(exc, InputError):
                raise
            raise InputError(f"malformed {type(watch.object).__name__}: {exc}") from None
    try:
        doc = orjson.loads(raw)  # refuses nesting deeper than 1024 (JSONDecodeError)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc}") from None
    return normalize(doc)


def _typed(wtype: str, obj: Pod | Event) -> list[Input]:
    watch = _WATCH_TYPE.get(wtype)  # one lookup: this runs for every line
    if watch is None:
        if wtype in ("BOOKMARK", "ERROR"):
            return []  # progress markers and relist requests are the watch source's business
        raise InputError(f"unknown watch event type {wtype!r}")
    if isinstance(obj, Pod):
        return [pod_seen(watch, obj)]
    ev = pod_event(watch, obj)
    return [ev] if ev is not None else []


def normalize(doc: Any, depth: int = 0) -> list[Input]:
    if depth > _MAX_DEPTH:
        raise InputError("envelopes nested too deep")
    if not isinstance(doc, dict):
        raise InputError(f"expected a JSON object, got {type(doc).__name__}")
    try:
        return _normalize(doc, depth)
    except InputError:
        raise
    except msgspec.ValidationError as exc:
        raise InputError(f"malformed {doc.get('kind') or 'input'}: {exc}") from None
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        # A field of the wrong type deep inside an object: bad input, not our bug.
        raise InputError(f"malformed {doc.get('kind') or 'input'}: {exc!r}") from None


def _normalize(doc: JSON, depth: int) -> list[Input]:
    if "specversion" in doc:
        return _cloudevent(doc, depth)
    wtype = doc.get("type")
    if "object" in doc and isinstance(wtype, str):
        if wtype in ("BOOKMARK", "ERROR"):
            return []
        if wtype not in _WATCH_TYPES:
            raise InputError(f"unknown watch event type {wtype!r}")
        now = _object(cast(WatchType, wtype), doc["object"], None)
        old = doc.get("oldObject")
        if isinstance(old, dict) and wtype == "MODIFIED":
            # An update that carries its before (Argo Events' resource source: oldBody):
            # the before first, as if seen earlier, so a webhook-only service can compare.
            return _object("ADDED", old, None) + now
        return now
    if "alerts" in doc and "version" in doc:
        return list(alerts_seen(doc))
    return _object("ADDED", doc, None)  # a bare object, a List, or one of our own documents


def _object(watch: WatchType, obj: Any, kind_hint: str | None) -> list[Input]:
    if not isinstance(obj, dict):
        raise InputError("watch event object is not a JSON object")
    kind = obj.get("kind") or kind_hint or _infer_kind(obj)
    if isinstance(kind, str) and kind.endswith("List"):
        # A List, bare or as a watch event's object (kubectl's `-w --output-watch-events`
        # prints what it listed first as one ADDED EventList): each item as that event.
        items = obj.get("items")
        if isinstance(items, list):
            out: list[Input] = []
            for item in items:
                out.extend(_object(watch, item, kind[: -len("List")]))
            return out
        if _empty_list(obj, kind):
            return []
    if isinstance(kind, str) and (decoder := DECODERS.get(kind)) is not None:
        return decoder(watch, obj, kind)  # the registered kinds (inputs.kinds)
    if kind in IGNORED_KINDS:
        return []
    raise InputError(f"unknown kind {kind!r}")


def _empty_list(doc: JSON, kind: str) -> bool:
    """A List of a kind we know with no items at all (Go's nil slice: `items` null or
    left out)."""
    item_kind = kind[: -len("List")]
    known = item_kind in DECODERS or item_kind in IGNORED_KINDS
    return known and doc.get("items") is None


def _infer_kind(obj: JSON) -> str | None:
    """List items and some watch streams omit `kind`; Events and Pods are recognisable."""
    if "involvedObject" in obj or "regarding" in obj:
        return "Event"
    if "containers" in (obj.get("spec") or {}):
        return "Pod"
    return None


def _cloudevent(doc: JSON, depth: int) -> list[Input]:
    for attr in ("id", "source", "type"):
        if not isinstance(doc.get(attr), str) or not doc[attr]:
            raise InputError(f"CloudEvent without required attribute {attr!r}")
    if doc.get("specversion") != "1.0":
        raise InputError(f"CloudEvent specversion {doc.get('specversion')!r}; only 1.0 is known")
    if "data_base64" in doc:
        raise InputError("CloudEvent with binary data_base64; send JSON data")
    data = doc.get("data")
    if isinstance(data, (str, bytes)):
        try:
            data = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise InputError(f"CloudEvent data is not JSON: {exc}") from None
    etype = doc["type"]
    if isinstance(data, dict):
        if etype.endswith("first-token") and "kind" not in data:
            data = {"kind": "FirstToken", "time": doc.get("time"), **data}
        elif etype.endswith("gpu-verdict") and "kind" not in data:
            data = {"kind": "GpuMemoryVerdict", "time": doc.get("time"), **data}
        data = _argo_events_body(data)
    return normalize(data, depth + 1)


def _argo_events_body(data: JSON) -> Any:
    """Unwrap Argo Events' payload envelopes; anything else passes unchanged."""
    if "body" not in data:
        return data
    body = data["body"]
    if isinstance(body, str):
        try:
            body = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise InputError(f"Argo Events body is not JSON: {exc}") from None
    rtype = data.get("type")
    if isinstance(rtype, str) and rtype in _ARGO_RESOURCE_TYPES:
        event = {"type": _ARGO_RESOURCE_TYPES[rtype], "object": body}
        if isinstance(data.get("oldBody"), dict):
            event["oldObject"] = data["oldBody"]
        return event
    return body


def input_time(item: Input) -> float | None:
    """The input's own timestamp: what the replay clock advances to."""
    return item.at
