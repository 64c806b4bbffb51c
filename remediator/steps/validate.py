"""Check names, UIDs and image references before they reach the API server.

Values arrive from workflow parameters, so they are checked against the exact
Kubernetes grammar (no injection, no surprises) and refused with the rule broken.
Each checker returns None when the value is fine, else what is wrong with it.
"""

from __future__ import annotations

from remediator.policy.names import dns1123_label_problem as dns1123_label
from remediator.policy.names import dns1123_subdomain_problem as dns1123_subdomain
from remediator.policy.names import image_problem as image
from remediator.policy.names import uid_problem as uid

__all__ = ["dns1123_label", "dns1123_subdomain", "image", "uid"]
