"""Simulated Kubernetes watch streams of vLLM inference pods, with ground truth.

For tests and benchmarks only (bench/ scripts put the repository root on sys.path): the
fleet simulator writes its own objects (`remediator/sim/fleet/kube.py`).
"""

from tests.simstream.forms import CREATED_FORMS, PULL_FORMS
from tests.simstream.plan import SCENARIOS, PodTruth
from tests.simstream.stream import tracked_pods, watch_stream
from tests.simstream.workloads import daemonset_event, deployment_event

__all__ = [
    "CREATED_FORMS",
    "PULL_FORMS",
    "SCENARIOS",
    "PodTruth",
    "daemonset_event",
    "deployment_event",
    "tracked_pods",
    "watch_stream",
]
