"""Bad input is a 4xx with a one-line log, never a 500 with a traceback.

The real service (aiohttp on 127.0.0.1:0) and a raw HTTP client (tests/sources/rawhttp.py);
each case below gave a 500 before its fix."""

from __future__ import annotations

import gzip
import socket
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remediator.runtime.service import Service, ServiceConfig
from tests.data import CAPTURES
from tests.logcheck import LogRecorder
from tests.runtime.conftest import WEBHOOK_TOKEN, stuck_pod
from tests.sources.rawhttp import Header, post, service_in_thread

AUTH: Header = (b"Authorization", b"Bearer " + WEBHOOK_TOKEN.encode())
JSON: Header = (b"Content-Type", b"application/json")
CE: list[Header] = [
    (b"ce-specversion", b"1.0"),
    (b"ce-id", b"ev-1"),
    (b"ce-source", b"argo-events/inference-workloads"),
    (b"ce-type", b"io.k8s.watch.pod"),
]


@pytest.fixture
def service(config: ServiceConfig) -> Iterator[Service]:
    with service_in_thread(config) as svc:
        yield svc


def refused(
    service: Service, logs: LogRecorder, headers: list[Header], body: bytes, status: int = 400
) -> dict[str, object]:
    """POST, expect `status`, and exactly one log line about it, without a traceback."""
    before = len(logs.lines)
    assert service.port is not None
    reply = post(service.port, headers, body)
    assert reply.status == status, reply
    new = [line for line in logs.lines[before:] if line["level"] in ("warning", "error")]
    assert [line["msg"] for line in new] == ["webhook refused"], new
    assert "exc" not in new[0]
    return new[0]


def nested(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


def test_non_utf8_bearer_token_is_401(service: Service, logs_at_debug: LogRecorder) -> None:
    line = refused(service, logs_at_debug, [(b"Authorization", b"Bearer \xff\xfe\x80")], b"{}", 401)
    assert "token" in str(line["error"])


def test_json_nested_1000_deep_is_400(service: Service, logs_at_debug: LogRecorder) -> None:
    for depth in (100, 1000, 100_000):
        refused(service, logs_at_debug, [AUTH, JSON], nested(depth))


@pytest.mark.parametrize("ctype", [b"application/json", b"application/cloudevents+json"])
def test_a_cloudevent_with_ce_headers_and_a_non_utf8_body_is_400(
    ctype: bytes, service: Service, logs_at_debug: LogRecorder
) -> None:
    """ce-* headers with a structured content type (the SDK then parses the body itself)."""
    headers = [AUTH, (b"Content-Type", ctype), *CE]
    for body in (b'{"type": "\xff\xfe"}', b"\x80\x81\x82", b"", b"[1]", nested(2000)):
        refused(service, logs_at_debug, headers, body)


def test_binary_cloudevent_with_non_utf8_attributes_is_400(
    service: Service, logs_at_debug: LogRecorder
) -> None:
    headers = [AUTH, JSON, *CE[:3], (b"ce-type", b"io.k8s.\xff")]
    refused(service, logs_at_debug, headers, orjson.dumps({"kind": "Pod"}))


@pytest.mark.parametrize("name", [b"ce-specversion", b"ce-id", b"ce-source", b"ce-type", b"ce-x"])
def test_a_non_utf8_byte_in_any_ce_header_is_400_naming_it(
    name: bytes, service: Service, logs_at_debug: LogRecorder
) -> None:
    """Issue 18 #9: `ce-specversion: 1.0\\xff` was a 500 and two logging tracebacks (the SDK's
    error quoted the byte, which neither the JSON answer nor the log line could encode)."""
    headers = [AUTH, JSON, *(h for h in CE if h[0] != name), (name, b"1.0\xff")]
    line = refused(service, logs_at_debug, headers, orjson.dumps({"kind": "Pod"}))
    assert name.decode() in str(line["error"]) and "UTF-8" in str(line["error"])


def test_a_bad_gzip_body_is_400(service: Service, logs_at_debug: LogRecorder) -> None:
    good = gzip.compress(b'{"type": "BOOKMARK", "object": {}}')
    # not gzip; a gzip header then garbage; a stream cut short inside its data
    for body in (b"not gzip at all", good[:10] + b"\xff" * 20, good[:12]):
        refused(service, logs_at_debug, [AUTH, JSON, (b"Content-Encoding", b"gzip")], body)


def test_an_unknown_content_encoding_is_4xx(service: Service, logs_at_debug: LogRecorder) -> None:
    assert service.port is not None
    reply = post(service.port, [AUTH, JSON, (b"Content-Encoding", b"x-made-up")], b"{}")
    assert 400 <= reply.status < 500, reply


# --- fuzz: hypothesis over bodies and headers, against the running service -------------------

SEEDS = [
    *(p.read_bytes() for p in sorted((CAPTURES / "alertmanager").glob("*.json"))),
    orjson.dumps({"type": "ADDED", "object": stuck_pod("vllm-fuzz-0")}),
    orjson.dumps({"specversion": "1.0", "id": "1", "source": "s", "type": "t", "data": {}}),
]
HEADER_NAMES = [
    b"Content-Type",
    b"Content-Encoding",
    b"Authorization",
    b"ce-specversion",
    b"ce-id",
    b"ce-source",
    b"ce-type",
    b"ce-time",
    b"ce-datacontenttype",
    b"ce-dataschema",
    b"X-Anything",
]
CTYPES = [b"application/json", b"application/cloudevents+json", b"text/plain", b"", b"\xff\xfe"]
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A real payload with bytes flipped, cut short, or a value swapped for any JSON value."""
    seed = draw(st.sampled_from(SEEDS))
    how = draw(st.sampled_from(["flip", "cut", "swap"]))
    if how == "cut":
        return seed[: draw(st.integers(0, len(seed)))]
    if how == "flip":
        data = bytearray(seed)
        for _ in range(draw(st.integers(1, 8))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        return bytes(data)
    doc = orjson.loads(seed)
    parent: Any = None
    key: Any = None
    node: Any = doc
    while isinstance(node, dict | list) and node and draw(st.booleans()):
        parent = node  # walk down a random path; the value found there is replaced
        key = draw(st.sampled_from(list(node) if isinstance(node, dict) else range(len(node))))
        node = node[key]
    value = draw(json_values)
    if parent is None:
        return orjson.dumps(value)
    parent[key] = value
    return orjson.dumps(doc)


@st.composite
def bodies(draw: st.DrawFn) -> tuple[bytes, list[Header]]:
    """A body and the Content-Encoding it may come with (or lie about)."""
    body = draw(
        st.one_of(
            st.binary(max_size=300),
            json_values.map(orjson.dumps),
            st.sampled_from(SEEDS),
            mutated(),
            mutated(),
            st.integers(1, 3000).map(nested),
            st.integers(1, 3000).map(lambda n: b"[" * n + b"]" * n),
        )
    )
    encoding = draw(st.sampled_from([b"", b"gzip", b"deflate", b"br", b"identity", b"x-lie"]))
    if not encoding:
        return body, []
    if encoding == b"gzip" and draw(st.booleans()):
        body = gzip.compress(body)
    elif encoding == b"deflate" and draw(st.booleans()):
        body = zlib.compress(body)
    return body, [(b"Content-Encoding", encoding)]


header_values = st.one_of(
    st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40).map(str.encode),
    st.binary(max_size=40).map(lambda v: v.replace(b"\r", b"").replace(b"\n", b"")),
)


@st.composite
def requests(draw: st.DrawFn) -> tuple[list[Header], bytes]:
    body, encoding = draw(bodies())
    auth = draw(st.sampled_from([[AUTH], [AUTH], [AUTH], []]))
    if not auth:
        auth = [(b"Authorization", b"Bearer " + draw(header_values))]
    ctype = [(b"Content-Type", draw(st.sampled_from(CTYPES) | st.sampled_from(CTYPES[:1])))]
    ce = draw(st.sampled_from([[], CE]))
    extra = draw(st.lists(st.tuples(st.sampled_from(HEADER_NAMES), header_values), max_size=2))
    return auth + ctype + ce + encoding + extra, body


FUZZ_EXAMPLES = 1000


def test_fuzzed_bodies_and_headers_never_get_a_5xx(
    service: Service, logs_at_debug: LogRecorder
) -> None:
    """Hypothesis over bodies and headers (bounded: FUZZ_EXAMPLES requests): every answer is a
    2xx or a 4xx, no request is left unanswered, and no traceback is logged for any of it."""
    assert service.port is not None
    port = service.port
    statuses: Counter[int] = Counter()

    @settings(
        max_examples=FUZZ_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(requests())
    def one(request: tuple[list[Header], bytes]) -> None:
        headers, body = request
        reply = post(port, headers, body)
        statuses[reply.status] += 1
        assert 200 <= reply.status < 500, (reply, headers, body[:200])

    one()
    print(f"\nfuzz: {sum(statuses.values())} requests, statuses {dict(sorted(statuses.items()))}")
    tracebacks = [line for line in logs_at_debug.lines if "exc" in line]
    assert tracebacks == []
    refusals = [line for line in logs_at_debug.lines if line["level"] == "warning"]
    assert len(refusals) <= sum(n for status, n in statuses.items() if status >= 400)
    assert statuses[202] and statuses[400] and statuses[401]  # each kind of answer was reached


def test_a_body_that_never_arrives_whole_is_408_and_closed(
    config: ServiceConfig, logs_at_debug: LogRecorder
) -> None:
    """A client that sends its headers and part of the body, then stalls (slowloris), gets 408
    after the idle timeout and its connection is closed: the handler is not held forever."""
    with service_in_thread(replace(config, http_idle_timeout_s=0.5)) as svc:
        assert svc.port is not None
        with socket.create_connection(("127.0.0.1", svc.port), timeout=10) as sock:
            head = b"POST /events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            head += b"%s: %s\r\n" % AUTH + b"Content-Type: application/json\r\n"
            sock.sendall(head + b"Content-Length: 1000\r\n\r\n" + b'{"version": "4"')
            answer = b""
            while chunk := sock.recv(4096):  # b"": the server closed the connection
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"request body not received within 0.5s" in answer
    refusals = [x for x in logs_at_debug.lines if x["msg"] == "webhook refused"]
    assert [x["status"] for x in refusals] == [408] and "exc" not in refusals[0]
