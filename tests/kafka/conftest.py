"""A real Apache Kafka broker for the tests: the one `scripts/test` started
($REMEDIATOR_KAFKA_BOOTSTRAP), else one of our own for this session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kafka.broker import Broker


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    given = os.environ.get("REMEDIATOR_KAFKA_DIR")  # scripts/test started one there
    if given and (Path(given) / "state.json").exists():
        known = Broker.load(Path(given))
        if known.running():
            yield known
            return
    own = Broker(tmp_path_factory.mktemp("kafka"))
    own.start()
    try:
        yield own
    finally:
        own.stop()


@pytest.fixture
def bootstrap(broker: Broker) -> str:
    return broker.bootstrap
