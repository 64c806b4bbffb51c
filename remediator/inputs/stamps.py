"""Which clock stamped which time: the API server's, or a node's kubelet's.

The API server stamps an object's creation, the PodScheduled transition (the binding), an
Event's creationTimestamp, every write (`managedFields[].time`), a deletion's request
(`deletionTimestamp` less the grace period it added) and a list's `Date` header.
Everything else on a Pod's status (container starts, Ready, Initialized) and an Event's
first/last/event times are the kubelet's, on its node's clock, which may be off by any
amount. The session's `now` is read from the API server's stamps alone: one node's clock
never moves another node's budgets. Alerts (Prometheus's clock), webhooks and our own probes
carry no API-server stamp at all.

Which of a kind's times are the API server's is said where the kind is registered
(`inputs.kinds`, `InputKind.stamped`), so a new kind says it in its one registration.
"""

from __future__ import annotations

from remediator.inputs.kinds import KINDS
from remediator.inputs.records import Input


def api_server_time(item: Input) -> float | None:
    """The newest time the API server itself stamped on `item`; None when it stamped none
    (or nobody registered its kind)."""
    kind = KINDS.get(type(item))
    if kind is None or kind.stamped is None:
        return None
    return kind.stamped(item)
