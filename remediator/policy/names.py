"""Names that may reach a workflow parameter: checked before they leave the core."""

from __future__ import annotations

import re

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_UID = re.compile(r"^[0-9a-fA-F][-0-9a-fA-F]{7,63}$")
# An OCI image reference: [registry[:port]/]path[:tag][@digest]; no spaces, quotes or $.
_IMAGE = re.compile(
    r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$"
)


def is_namespace(value: str) -> bool:
    return bool(_DNS1123_LABEL.match(value))


def is_object_name(value: str) -> bool:
    """Pod, DaemonSet and Node names are DNS-1123 subdomains."""
    return len(value) <= 253 and bool(_DNS1123_SUBDOMAIN.match(value))


def is_uid(value: str) -> bool:
    return bool(_UID.match(value))


def is_image(value: str) -> bool:
    return len(value) <= 512 and bool(_IMAGE.match(value))
