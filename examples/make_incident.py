"""Write examples/incident-70b.jsonl: a recorded morning on a 70B vLLM fleet.

    python examples/make_incident.py > examples/incident-70b.jsonl

What happens (all times from the simulator's deterministic clock):
  - a rollout of vllm-llama-70b pods: most cold-start in ~8 min (image pull ~182 s,
    container start ~94 s, engine init ~236 s), warm nodes much faster;
  - one pod hangs in engine init: the timer finds it, min_age waits for its expected
    cold start, then it is deleted; Alertmanager's VLLMEngineInitSlow for it arrives too,
    and again (repeat), and resolves: one incident, one action;
  - one pod waits for GPUs (Insufficient nvidia.com/gpu): told, never deleted;
  - a new vLLM image on the Deployment: the GPU warmup DaemonSet is restarted;
  - the verification finds one node whose GPU memory does not settle: told;
  - first tokens are reported for two pods.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

# The stream generator is a test helper (tests/simstream), not part of the package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from remediator.inputs.decode import decode  # noqa: E402
from remediator.inputs.pods import engine_run, spec_info  # noqa: E402
from tests.simstream.forms import rfc3339  # noqa: E402
from tests.simstream.plan import BASE_TIME  # noqa: E402
from tests.simstream.stream import watch_stream  # noqa: E402
from tests.simstream.workloads import deployment_event  # noqa: E402

SEED, PODS = 29, 8
OLD, NEW = "vllm/vllm-openai:v0.6.3", "vllm/vllm-openai:v0.6.4.post1"


def alert(status: str, ns: str, pod: str, starts: int, ends: int | None) -> bytes:
    labels = {"alertname": "VLLMEngineInitSlow", "namespace": ns, "pod": pod, "severity": "page"}
    return orjson.dumps(
        {
            "version": "4",
            "groupKey": '{}:{alertname="VLLMEngineInitSlow"}',
            "truncatedAlerts": 0,
            "status": status,
            "receiver": "remediator",
            "groupLabels": {"alertname": "VLLMEngineInitSlow"},
            "commonLabels": labels,
            "commonAnnotations": {},
            "externalURL": "http://alertmanager.monitoring:9093",
            "alerts": [
                {
                    "status": status,
                    "labels": labels,
                    "annotations": {"summary": f"vLLM engine init on {pod} over 60s, 3 in a row"},
                    "startsAt": rfc3339(starts),
                    "endsAt": rfc3339(ends) if ends else "0001-01-01T00:00:00Z",
                    "generatorURL": "http://prometheus.monitoring:9090/graph",
                    "fingerprint": "5f3c1e0b9a7d2c41",
                }
            ],
        }
    )


def cloudevent(ctype: str, when: int, data: dict[str, object]) -> bytes:
    return orjson.dumps(
        {
            "specversion": "1.0",
            "id": f"{ctype}-{when}",
            "source": "urn:remediator:example",
            "type": ctype,
            "time": rfc3339(when),
            "datacontenttype": "application/json",
            "data": data,
        }
    )


def main() -> None:
    out = sys.stdout.buffer
    lines = [line for line, _ in watch_stream(PODS, seed=SEED)]
    pods = {}
    for line in lines:
        for item in decode(line):
            if type(item).__name__ == "PodSeen":
                pods[item.uid] = item
    started_at = {
        uid: engine_run(p.statuses, spec_info(p.spec, p.labels).container).started
        for uid, p in pods.items()
    }
    stuck = next(p for p in pods.values() if started_at[p.uid] is not None and p.ready is None)
    ready = [p for p in pods.values() if p.ready is not None]
    end = max(int(i.at or 0) for line in lines for i in decode(line))

    out.write(deployment_event(image=OLD, watch="ADDED", at=BASE_TIME) + b"\n")
    for line in lines:
        out.write(line + b"\n")
    for p in ready[:2]:  # the engine answered its first request a few seconds after Ready
        ft = {"kind": "FirstToken", "namespace": p.namespace, "pod": p.name, "uid": p.uid,
              "time": rfc3339(int(p.ready or 0) + 4)}  # fmt: skip
        out.write(orjson.dumps(ft) + b"\n")
    started = int(started_at[stuck.uid] or 0)
    out.write(alert("firing", stuck.namespace, stuck.name, started + 180, None) + b"\n")
    out.write(alert("firing", stuck.namespace, stuck.name, started + 180, None) + b"\n")
    t = max(end, started + 700)
    out.write(alert("resolved", stuck.namespace, stuck.name, started + 180, t) + b"\n")
    out.write(deployment_event(image=NEW, generation=2, ready=4, at=t + 60) + b"\n")
    verdict = {"node": "ip-10-20-9-86.us-west-2.compute.internal", "stable": False,
               "incident": "image-update-example",
               "detail": "GPU 1 spread 8192 MiB > 512 MiB over 20 samples"}  # fmt: skip
    out.write(cloudevent("io.remediator.gpu-verdict", t + 600, verdict) + b"\n")


if __name__ == "__main__":
    main()
