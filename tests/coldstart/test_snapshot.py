"""What a list held → the core: a malformed object is counted and spoils no other."""

from __future__ import annotations

import copy
import json

from hypothesis import given
from hypothesis import strategies as st

from remediator.coldstart.kube import Page
from remediator.coldstart.snapshot import Snapshot, _decode, _new, event_selector
from remediator.coldstart.target import Target
from remediator.inputs.records import PodSeen
from remediator.timeline.tracker import Tracker
from tests.coldstart.support import REDIS_PODS

GOOD = json.loads(REDIS_PODS.read_text())["items"][0]


def _snap() -> Snapshot:
    return Snapshot(Tracker(), "default", Target())


def test_a_malformed_item_is_counted_and_the_rest_kept() -> None:
    bad = copy.deepcopy(GOOD)
    bad["metadata"]["uid"] = ""
    late = copy.deepcopy(GOOD)
    late["status"]["conditions"][0]["lastTransitionTime"] = "yesterday"
    snap = _snap()
    items = _decode(snap, "Pod", [Page([bad, GOOD, late], "1", None, None)])
    assert snap.refused == 2
    assert [i.name for i in items if isinstance(i, PodSeen)] == [GOOD["metadata"]["name"]]


@given(st.dictionaries(st.sampled_from(["metadata", "spec", "status", "kind"]), st.integers()))
def test_no_object_makes_the_decoder_raise(junk: dict[str, int]) -> None:
    snap = _snap()
    items = _decode(snap, "Pod", [Page([junk, GOOD], "1", None, None)])
    assert len([i for i in items if isinstance(i, PodSeen)]) == 1
    assert snap.refused <= 1


def test_event_selectors_name_each_apis_field() -> None:
    assert event_selector("", Target()) == "involvedObject.kind=Pod"
    assert event_selector("events.k8s.io", Target("pod", "p")) == (
        "regarding.kind=Pod,regarding.name=p"
    )


def test_an_event_in_both_apis_is_decoded_once_one_in_either_always() -> None:
    core = {"metadata": {"uid": "e1"}, "n": 1}
    both = {"metadata": {"uid": "e1"}, "n": 2}
    late = {"metadata": {"uid": "e2"}}
    nameless = {"metadata": {}}
    held: set[str] = set()
    first = _new([Page([core, nameless], "1", None, None)], held)
    second = _new([Page([both, late, nameless], "2", None, "more")], held)
    assert [p.items for p in first] == [[core, nameless]]
    assert [p.items for p in second] == [[late, nameless]]
    assert second[0].version == "2" and second[0].more == "more"
