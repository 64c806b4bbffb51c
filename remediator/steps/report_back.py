"""Tell remediator what the GPU memory verification found, as a CloudEvent.

The verdict is the step's result either way (stdout, exit code); posting it back lets
the service notify on-call and, if the policy says so, cordon the node. Standard library
only: this runs on GPU nodes whose image has python, click and nvidia-smi, nothing more.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

EVENT_TYPE = "io.remediator.gpu-verdict"
TIMEOUT_S = 10.0


def summary(fields: dict[str, Any]) -> str:
    """One line for people: which GPUs did not settle, and why."""
    parts = [
        f"GPU {g['index']}: " + "; ".join(r["detail"] for r in g["reasons"])
        for g in fields.get("gpus", [])
        if g.get("status") != "stable"
    ]
    return " | ".join(parts) or ("settled" if fields.get("stable") else "not settled")


def cloudevent(node: str, incident: str | None, fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": str(uuid.uuid4()),
        "source": f"urn:remediator:step:verify-gpu-memory:{node}",
        "type": EVENT_TYPE,
        "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "datacontenttype": "application/json",
        "data": {
            "node": node,
            "stable": bool(fields.get("stable")),
            "detail": summary(fields),
            "incident": incident,
        },
    }


def token_from_file() -> str | None:
    """The token in the file REMEDIATOR_WEBHOOK_TOKEN_FILE names (a mounted Secret)."""
    path = os.environ.get("REMEDIATOR_WEBHOOK_TOKEN_FILE")
    return (Path(path).read_text(encoding="utf-8").strip() or None) if path else None


def post(url: str, event: dict[str, Any], bearer: str | None) -> int:
    """POST the event; the HTTP status, or raise OSError (URLError) when nobody answered."""
    headers = {"Content-Type": "application/cloudevents+json"}
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    req = urllib.request.Request(
        url, data=json.dumps(event).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:  # noqa: S310 (URL is ours)
            return int(resp.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
