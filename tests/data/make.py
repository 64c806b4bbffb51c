"""Writes the small JSONL fixtures of tests/replay from tests/timeline/streams.py.

Run from the repository root: .venv/bin/python -m tests.data.make
(tests/replay/test_data.py checks the committed files are what this writes.)
"""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.timeline.streams import (
    IMAGE,
    cloudevent,
    cold_start,
    event,
    jsonl,
    pod,
    pulled,
    watch,
)

HERE = Path(__file__).resolve().parent
UID_1 = "6a1d6c2e-1f0b-4c5e-9d8e-70b000000002"
POD_1 = "llama-70b-1"


def second_pod_events() -> list[dict[str, object]]:
    """llama-70b-1's Events, recorded before its pod object arrives (a separate watch)."""
    return [
        watch(
            event(
                "Scheduled",
                "Successfully assigned llm/llama-70b-1 to gpu-node-8",
                20,
                uid=UID_1,
                name=POD_1,
                container=None,
            ),
            "ADDED",
        ),  # fmt: skip
        watch(
            event(
                "Pulled",
                f'Container image "{IMAGE}" already present on machine',
                21,
                uid=UID_1,
                name=POD_1,
            ),
            "ADDED",
        ),  # fmt: skip
    ]


def second_pod() -> list[dict[str, object]]:
    # Created 18, scheduled 20, nothing pulled, started 30: still in engine init.
    return [watch(pod(uid=UID_1, name=POD_1, created=18, scheduled=20, started=30,
                      node="gpu-node-8"), "ADDED")]  # fmt: skip


def cold_start_file() -> bytes:
    return jsonl(second_pod_events() + cold_start() + second_pod())


def bad_lines_file() -> bytes:
    """Every line number matters: tests name them (see tests/replay/test_bad_input.py)."""
    cs = cold_start()
    pulled_bump = event("Pulled", pulled("3m2s", "3m2s", 9876543210), 195, last=250, count=2)
    no_id = cloudevent({"namespace": "llm", "pod": "llama-70b-0"}, time="2025-03-01T12:08:50Z")
    del no_id["id"]
    lines: list[bytes] = [
        orjson.dumps(cs[0]),  # 1 pod without conditions: fine
        orjson.dumps(cs[1]),  # 2 FailedScheduling
        b'{"type": "ADDED", "object": {"kind": "Pod", "metadata": ',  # 3 malformed JSON
        orjson.dumps(cs[2]),  # 4 scheduled
        orjson.dumps(watch({"kind": "ConfigMap", "metadata": {"name": "c"}})),  # 5 unknown kind
        orjson.dumps(cs[3]),  # 6 Scheduled event
        orjson.dumps(cs[4]),  # 7 Pulling
        orjson.dumps(cs[4]),  # 8 duplicate Pulling
        orjson.dumps(
            {
                "type": "BOOKMARK",
                "object": {"kind": "Pod", "metadata": {"resourceVersion": "12746"}},
            }
        ),  # 9
        orjson.dumps(cs[6]),  # 10 Pulled at 195
        orjson.dumps(watch(pulled_bump)),  # 11 count bump: count 2, lastTimestamp 250
        orjson.dumps(no_id),  # 12 CloudEvent without id
        orjson.dumps({"version": "3", "status": "firing", "alerts": []}),  # 13 Alertmanager v3
        orjson.dumps(cs[10]),  # 14 Ready at 525 ...
        orjson.dumps(cs[9]),  # 15 ... then a stale, earlier update (out of order)
        orjson.dumps(cs[8]),  # 16 Started event, late
        b"",  # 17 blank: ignored
        orjson.dumps(cs[11]),  # 18 first token 530
    ]
    return b"\n".join(lines) + b"\n"


FILES = {"cold_start_70b.jsonl": cold_start_file, "bad_lines.jsonl": bad_lines_file}


def main() -> None:
    for name, make in FILES.items():
        (HERE / name).write_bytes(make())


if __name__ == "__main__":
    main()
