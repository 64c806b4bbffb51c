from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediator.policy.selector import SelectorError, parse_selector

LABELS = {"app": "vllm-inference", "tier": "gpu", "example.com/team": "llm"}


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ("app=vllm-inference", True),
        ("app==vllm-inference", True),
        ("app!=vllm-inference", False),
        ("app=other", False),
        ("app in (vllm-inference, other)", True),
        ("app notin (vllm-inference)", False),
        ("tier", True),
        ("!tier", False),
        ("!missing", True),
        ("app=vllm-inference,tier=gpu", True),
        ("app=vllm-inference,tier=cpu", False),
        ("example.com/team=llm", True),
        ("", True),
    ],
)
def test_selector_matches_like_kubectl(text: str, matches: bool) -> None:
    assert parse_selector(text).matches(LABELS) is matches


@pytest.mark.parametrize(
    "text", ["app=(x", "app in (a", "a b=c", "app=x y", "-app=x", "app=$(reboot)", "k=" + "v" * 64]
)
def test_bad_selectors_are_refused(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(text)


@given(st.text(max_size=40))
def test_any_text_parses_or_is_refused_cleanly(text: str) -> None:
    try:
        sel = parse_selector(text)
    except SelectorError:
        return
    sel.matches(LABELS)
