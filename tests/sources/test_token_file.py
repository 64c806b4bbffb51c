"""The webhook token file (REMEDIATOR_WEBHOOK_TOKEN_FILE) on the real aiohttp server.

Issue 18 #6: rewriting the file in place gave 500 to good webhooks (a read between the
truncate and the write saw an empty file), a half-written file refused them with 401, and a
removed or empty file gave 500 on every webhook while /healthz stayed 200. Now a good token
is admitted while the file is rewritten, and a file with no token is a 503 (the sender
retries), said once in the log and by /readyz."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest

from remediator.runtime.service import Service, ServiceConfig
from tests.logcheck import LogRecorder
from tests.runtime.conftest import running, stuck_pod, wait_until

TOKEN = "webhook-file-token-5b7d1e0c9a8f"
NEW_TOKEN = "webhook-file-token-rotated-77c3a1"


@pytest.fixture
def token_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "webhook-token"
    path.write_text(TOKEN + "\n")
    monkeypatch.delenv("REMEDIATOR_WEBHOOK_TOKEN", raising=False)
    monkeypatch.setenv("REMEDIATOR_WEBHOOK_TOKEN_FILE", str(path))
    return path


@pytest.fixture
async def service(config: ServiceConfig, token_file: Path) -> AsyncIterator[Service]:
    async with running(replace(config, watch=False)) as svc:
        yield svc


def event(i: int) -> dict[str, object]:
    obj = stuck_pod(f"vllm-rot-{i}")
    obj["metadata"]["uid"] = f"0f1e2d3c-4b5a-6978-8796-{i:012d}"
    obj["metadata"]["creationTimestamp"] = "2024-05-01T10:00:00Z"
    return {"type": "ADDED", "object": obj}


async def post(http: aiohttp.ClientSession, token: str, i: int = 0) -> int:
    headers = {"Authorization": f"Bearer {token}"}
    async with http.post("/events", json=event(i), headers=headers) as resp:
        await resp.read()
        return resp.status


@contextmanager
def rewritten_in_place(path: Path, token: str, rename: bool = False) -> Iterator[list[int]]:
    """A writer that truncates the file and writes the token in two parts, again and again
    (a sync job, `echo > file`): a reader may find it empty, or half written. With `rename`,
    it writes a new file and renames it over the old one, as the kubelet swaps a mounted
    Secret: a reader finds the old token or the new one, never a part."""
    stop = threading.Event()
    writes = [0]

    def run() -> None:
        data = (token + "\n").encode()
        while not stop.is_set():
            target = path.with_suffix(".new") if rename else path
            with target.open("wb") as f:  # truncates: the same inode, rewritten
                f.write(data[:7])
                f.flush()
                time.sleep(0.002)
                f.write(data[7:])
            if rename:
                os.replace(target, path)
            writes[0] += 1
            time.sleep(0.005)

    thread = threading.Thread(target=run, name="token-writer", daemon=True)
    thread.start()
    try:
        yield writes
    finally:
        stop.set()
        thread.join(5)


@pytest.mark.parametrize("rename", [False, True], ids=["in place", "by rename"])
async def test_rewriting_the_file_never_refuses_a_good_token(
    rename: bool, service: Service, http: aiohttp.ClientSession, token_file: Path
) -> None:
    assert await post(http, TOKEN, 300) == 202  # a service in use when the rewrites begin
    statuses: Counter[int] = Counter()
    sent = 0
    with rewritten_in_place(token_file, TOKEN, rename) as writes:
        # at least 300 requests, and on until the file was rewritten 10 times under them:
        # how many rewrites fit in 300 requests depends on the machine's speed
        while sent < 300 or writes[0] <= 10:
            batch = [post(http, TOKEN, i) for i in range(sent, sent + 30)]
            statuses.update(await asyncio.gather(*batch))
            sent += 30
    assert statuses == Counter({202: sent}), statuses


async def test_a_token_rotated_in_place_is_the_one_admitted_after(
    service: Service, http: aiohttp.ClientSession, token_file: Path
) -> None:
    with rewritten_in_place(token_file, NEW_TOKEN) as writes:
        # a whole rewrite, however slow the machine (a fixed 50 ms raced the writer's start)
        await wait_until(lambda: writes[0] > 0, what="the token rewritten")
    assert await post(http, NEW_TOKEN) == 202
    assert await post(http, TOKEN) == 401


@pytest.mark.parametrize("how", ["removed", "emptied"])
async def test_no_token_in_the_file_is_a_503_said_once_and_by_readyz(
    how: str,
    service: Service,
    http: aiohttp.ClientSession,
    token_file: Path,
    logs_at_debug: LogRecorder,
) -> None:
    if how == "removed":
        token_file.unlink()
    else:
        token_file.write_text("\n")
    for i in range(5):
        async with http.post("/events", json=event(i), headers={"Authorization": "Bearer x"}) as r:
            assert r.status == 503, await r.text()
            assert r.headers["Retry-After"] == "1"
            assert "webhook token" in (await r.json())["error"]
    async with http.get("/readyz") as r:
        assert r.status == 503
        assert "webhook token" in (await r.json())["detail"]
    async with http.get("/healthz") as r:
        assert r.status == 200  # a restart would not bring the token back
    said = logs_at_debug.named("webhook not accepted: 503")
    assert len(said) == 1 and "webhook token" in said[0]["error"], said
    assert not [x for x in logs_at_debug.lines if "exc" in x]

    token_file.write_text(TOKEN + "\n")  # the secret is back: so is the service
    assert await post(http, TOKEN) == 202
    async with http.get("/readyz") as r:
        assert r.status == 200
