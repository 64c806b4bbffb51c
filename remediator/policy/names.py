"""The grammar of names (moved to `inputs.names`: alert routing reads it below the policy)."""

from remediator.inputs.names import (
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    IMAGE,
    UID,
    dns1123_label_problem,
    dns1123_subdomain_problem,
    image_problem,
    is_namespace,
    is_object_name,
    uid_problem,
)

__all__ = [
    "DNS1123_LABEL",
    "DNS1123_SUBDOMAIN",
    "IMAGE",
    "UID",
    "dns1123_label_problem",
    "dns1123_subdomain_problem",
    "image_problem",
    "is_namespace",
    "is_object_name",
    "uid_problem",
]
