"""Faust's Kafka transport, its worker consumer's fetch wait made a setting.

Faust builds the worker's consumer with `fetch_max_wait_ms=1500`, written into its code.
One consumer fetches every topic a worker reads (inputs, candidates, commands, the
changelogs), and aiokafka keeps one fetch in flight per broker: a partition whose
records were still buffered when that fetch left is not in it, so what is written to it
next waits at the broker until the fetch in flight comes back, and a fetch over quiet
partitions comes back only at the end of its wait. Every hop of the pipeline (inputs ->
candidates -> commands) could pay up to 1.5 s that way: measured in
`bench/bench_kafka.py`, one worker idled ~1 s of a 4.5 s run between the last input and
the retries after it (with 50 ms: 1.5-1.9x the inputs/s, in pairs). A short wait bounds
that stall; an idle worker then asks the broker a few times more a second, which costs
it little (docs/kafka.md, "Fetch wait").
"""

from __future__ import annotations

from typing import Any

import faust
from faust.transport.drivers import aiokafka as faust_aiokafka


class _Thread(faust_aiokafka.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        # aiokafka hands it to its fetcher at start(), which comes after this.
        consumer._fetch_max_wait_ms = transport.fetch_wait_ms
        return consumer


class _Consumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return _Thread(self, loop=self.loop, beacon=self.beacon)


class ShortWaitTransport(faust_aiokafka.Transport):
    """Faust's aiokafka transport; its worker consumer waits at most `fetch_wait_ms`."""

    Consumer = _Consumer

    def __init__(self, app: faust.App, fetch_wait_s: float) -> None:
        super().__init__(app.conf.broker_consumer, app)
        self.fetch_wait_ms = max(1, round(fetch_wait_s * 1000))
