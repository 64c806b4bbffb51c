"""Check names, UIDs and image references before they reach the API server.

Values arrive from workflow parameters, so they are checked against the exact
Kubernetes grammar (no injection, no surprises) and refused with the rule broken.
Each checker returns None when the value is fine, else what is wrong with it.
"""

from __future__ import annotations

import re

_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(rf"^{_LABEL}$")
_DNS1123_SUBDOMAIN = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$")
# Kubernetes stamps every object with a lowercase RFC 4122 UUID; the UID
# precondition is an exact string compare, so other spellings could never match.
_UID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
# The distribution/reference grammar: [host[:port]/]path[:tag][@digest].
_HOST = (
    r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
)
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(
    rf"^(?:{_HOST}(?::[0-9]+)?/)?{_PATH_PART}(?:/{_PATH_PART})*"
    r"(?::[\w][\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$"
)


def dns1123_label(value: str) -> str | None:
    if len(value) > 63:
        return f"is {len(value)} characters; at most 63"
    if not _DNS1123_LABEL.match(value):
        return "must be lowercase letters, digits and '-', starting and ending alphanumeric"
    return None


def dns1123_subdomain(value: str) -> str | None:
    if len(value) > 253:
        return f"is {len(value)} characters; at most 253"
    if not _DNS1123_SUBDOMAIN.match(value):
        return (
            "must be lowercase letters, digits, '-' and '.', each dot-separated part "
            "starting and ending alphanumeric"
        )
    return None


def uid(value: str) -> str | None:
    if not _UID.match(value):
        return "must be a lowercase UUID like 3f2c1a9e-8b7d-4c6e-9f01-23456789abcd"
    return None


def image(value: str) -> str | None:
    if len(value) > 512 or not _IMAGE.match(value):
        return "must be an image reference like registry.example.com/team/vllm:0.6.3[@sha256:…]"
    return None
