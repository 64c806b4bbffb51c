"""Suite-wide settings: a red run always means a real defect, and can be run again.

Order. pytest-randomly shuffles the tests (modules, then the tests in each) and prints the seed
in the header: `Using --randomly-seed=N`. `-p randomly --randomly-seed=N` runs that order
again; `-p no:randomly` keeps file order. `--reverse` runs the collected order backwards (after
any shuffle): CI runs the unit part a second time that way (scripts/test).

Seeds. Each hypothesis test draws from its own seed, derived from one base and the test's id:
the base is `--hypothesis-seed` where given, else pytest-randomly's seed, else a random one; the
header prints it, and a failing hypothesis test prints its own seed and the command that
replays it. The example database is off: what a run draws depends on the seed alone, never on
what an earlier run on this machine found; hypothesis' other files go to the temp folder, so
nothing is written into the checkout. A failure also prints hypothesis' `@reproduce_failure`
blob.

Hypothesis timing: the suite runs on small shared CI machines (2 cores), where generating an
example or running one can be slow for reasons that have nothing to do with the code under
test. The `shared` profile keeps every property's example count and checks, and drops only the
timing ones (per-example deadline, "generation is slow"), which fail by load, not by defect.

Shared state: tests/sharing.py watches the module-level lists, dicts and sets of the modules
in tests/ and the data that wider-scoped fixtures hand out; a test that changes one in place
fails (`--no-globals-watch` turns both off).

Logging: a test that runs a command in-process (serve's, the worker's: `setup_logging`) puts a
handler on the root logger and sets levels; each test gets the logging it found back, so a later
test's output never goes through an earlier test's handler (`_own_logging`).

Servers: the tests under SERVERS start real servers (the control plane, Argo, Kafka, Prometheus
and Alertmanager); they are marked `servers`. The rest is the unit part: `-m "not servers"`.
"""

from __future__ import annotations

import logging
import random
import tempfile
import zlib
from collections.abc import Generator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir

from tests.sharing import (
    GlobalsWatch,
    changed_fixtures,
    fingerprints,
    shared_fixture_values,
)

pytest_plugins = ["pytester"]  # tests/test_suite_order.py runs small suites with these hooks

# Hypothesis' own files (a cache of the constants it finds in the source) go under the temp
# folder, never into the checkout.
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "remediator-hypothesis")
settings.register_profile(
    "shared",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
    print_blob=True,
)
settings.load_profile("shared")

TESTS = Path(__file__).resolve().parent

# The parts that need real servers, relative to tests/: everything else is the unit part.
SERVERS = ("live/", "kafka/", "slo/", "runtime/test_alert_loop.py")

_BASE = pytest.StashKey[int]()
_WATCH = pytest.StashKey[GlobalsWatch]()
_OWN_SEED = "_hypothesis_internal_use_seed"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("remediator")
    group.addoption(
        "--reverse",
        action="store_true",
        help="run the collected tests in reverse order (after pytest-randomly's shuffle, if on)",
    )
    group.addoption(
        "--no-globals-watch",
        action="store_true",
        help="do not fail a test that changes module-level or shared fixture data",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "servers: starts real servers (control plane, Argo, Kafka, Prometheus)"
    )
    if not config.getoption("no_globals_watch"):
        config.stash[_WATCH] = GlobalsWatch(TESTS)


def base_seed(config: pytest.Config) -> int:
    """The base of every hypothesis seed (fixed at first use: after pytest-randomly's)."""
    if _BASE not in config.stash:
        config.stash[_BASE] = _choose_base(config)
    return config.stash[_BASE]


def _choose_base(config: pytest.Config) -> int:
    given = config.getoption("hypothesis_seed", None)
    if given is not None:
        return int(given) if str(given).isdigit() else zlib.crc32(str(given).encode())
    shuffled = config.getoption("randomly_seed", None)
    if isinstance(shuffled, int):
        return shuffled
    return random.SystemRandom().getrandbits(32)


def pytest_report_header(config: pytest.Config) -> str:
    base = base_seed(config)
    return f"hypothesis: a seed per test from base {base} (again: --hypothesis-seed={base})"


def pytest_itemcollected(item: pytest.Item) -> None:
    rel = item.path.resolve().relative_to(TESTS).as_posix()
    if rel.startswith(SERVERS):
        item.add_marker(pytest.mark.servers)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("reverse"):
        items.reverse()


def pytest_collection_finish(session: pytest.Session) -> None:
    watch = session.config.stash.get(_WATCH, None)
    if watch is not None:
        watch.check()


def hypothesis_seed(item: pytest.Item) -> int | None:
    """The seed this item's hypothesis test draws from; None for other tests."""
    test = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
    if not getattr(test, "is_hypothesis_test", False):
        return None
    return (base_seed(item.config) + zlib.crc32(item.nodeid.encode())) % 2**32


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    shared = shared_fixture_values(item)
    before = fingerprints(shared)
    result = yield from _seeded(item)
    changed = changed_fixtures(shared, before)
    if changed and _WATCH in item.config.stash:
        message = "this test changed data other tests read:\n  " + "\n  ".join(changed)
        pytest.fail(message, pytrace=False)
    return result


def _seeded(item: pytest.Item) -> Generator[None, None, None]:
    seed = hypothesis_seed(item)
    test = getattr(item.obj, "__func__", item.obj) if seed is not None else None  # type: ignore[attr-defined]
    if test is None or getattr(test, _OWN_SEED, None) is not None:  # an explicit @seed wins
        return (yield)
    setattr(test, _OWN_SEED, seed)
    try:
        return (yield)
    finally:
        setattr(test, _OWN_SEED, None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    seed = hypothesis_seed(item)
    if report.failed and call.when == "call" and seed is not None:
        base = base_seed(item.config)
        again = f"pytest '{item.nodeid}' --hypothesis-seed={base}"
        report.sections.append(("hypothesis seed", f"seed {seed}; again: {again}"))
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    result = yield
    watch = item.config.stash.get(_WATCH, None)
    changed = watch.check() if watch is not None else []
    if changed:
        pytest.fail(
            "this test changed module-level data other tests read (build a fresh copy):\n  "
            + "\n  ".join(changed),
            pytrace=False,
        )
    return result


@pytest.fixture(autouse=True)
def _own_logging() -> Generator[None, None, None]:
    """The root logger's handlers and every logger's level, as they were before the test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {
        name: logger.level
        for name, logger in logging.root.manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    }
    yield
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    for handler in handlers:
        if handler not in root.handlers:
            root.addHandler(handler)
    root.setLevel(level)
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):
            logger.setLevel(levels.get(name, logging.NOTSET))
