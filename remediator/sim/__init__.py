"""Simulated Kubernetes watch streams of vLLM inference pods, with ground truth.

For tests and benchmarks only: nothing in the service imports this package.
"""

from remediator.sim.forms import CREATED_FORMS, PULL_FORMS
from remediator.sim.plan import SCENARIOS, PodTruth
from remediator.sim.stream import tracked_pods, watch_stream
from remediator.sim.workloads import daemonset_event, deployment_event

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
