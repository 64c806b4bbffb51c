"""The suite's own machinery (tests/conftest.py), run on small suites of its own: the order can
be reversed, hypothesis draws follow the printed seed, and a test that changes shared data fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = (Path(__file__).parent / "conftest.py").read_text()


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST.replace('pytest_plugins = ["pytester"]', ""))
    return pytester


def test_reverse_runs_the_collected_order_backwards(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_a="def test_1(): pass\ndef test_2(): pass\ndef test_3(): pass\n")
    ran = suite.runpytest_inprocess("-p", "no:randomly", "--reverse", "-v")
    ran.assert_outcomes(passed=3)
    ran.stdout.re_match_lines([r".*test_3 PASSED", r".*test_2 PASSED", r".*test_1 PASSED"])


def test_the_same_seed_draws_the_same_examples_and_another_seed_others(
    suite: pytest.Pytester,
) -> None:
    suite.makepyfile(
        test_h="""
from hypothesis import given, settings, strategies as st

@settings(max_examples=5)
@given(st.integers(0, 2**60))
def test_draws(x):
    print("drew", x)
"""
    )

    def drawn(*seed: str) -> list[str]:
        ran = suite.runpytest_inprocess("-p", "no:randomly", "-s", *seed)
        ran.assert_outcomes(passed=1)
        return [line for line in ran.outlines if line.startswith("drew")]

    assert drawn("--hypothesis-seed=7") == drawn("--hypothesis-seed=7")
    assert drawn("--hypothesis-seed=7") != drawn("--hypothesis-seed=8")


def test_a_failing_property_prints_its_seed_and_how_to_run_it_again(
    suite: pytest.Pytester,
) -> None:
    suite.makepyfile(
        test_f="""
from hypothesis import given, strategies as st

@given(st.integers())
def test_fails(x):
    assert x < 10
"""
    )
    ran = suite.runpytest_inprocess("-p", "no:randomly", "--hypothesis-seed=5")
    ran.assert_outcomes(failed=1)
    ran.stdout.fnmatch_lines(["*hypothesis seed*", "*again: pytest *--hypothesis-seed=5*"])
    ran.stdout.fnmatch_lines(["*@reproduce_failure*"])


def test_a_test_that_changes_shared_data_fails(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        test_shared="""
import pytest

ARGS = ["--model"]

@pytest.fixture(scope="module")
def docs():
    return {"a": [1]}

def test_changes_a_constant():
    ARGS[0] = None

def test_changes_a_module_fixture(docs):
    docs["a"].append(2)

def test_reads_only(docs):
    assert ARGS and docs
"""
    )
    ran = suite.runpytest_inprocess("-p", "no:randomly")
    ran.assert_outcomes(passed=2, failed=1, errors=1)
    ran.stdout.fnmatch_lines(["*test_shared.ARGS changed in place*"])
    ran.stdout.fnmatch_lines(["*fixture 'docs' (shared beyond this test) changed in place*"])
