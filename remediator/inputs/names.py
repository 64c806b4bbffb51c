"""The grammar of names that may reach the API server or a workflow parameter.

One place for it: the policy checks alert labels with it, the executors check workflow
parameters, the steps check their arguments. Each `*_problem` returns None when the
value is fine, else what is wrong with it. Standard library only: the steps import this
on GPU nodes whose image has no kubernetes client.
"""

from __future__ import annotations

import re

_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = re.compile(rf"{_LABEL}")
DNS1123_SUBDOMAIN = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
# Kubernetes stamps every object with a lowercase RFC 4122 UUID; a UID precondition is an
# exact string compare, so other spellings could never match.
UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# The distribution/reference grammar: [host[:port]/]path[:tag][@digest].
_HOST = (
    r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
)
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE = re.compile(
    rf"(?:{_HOST}(?::[0-9]+)?/)?{_PATH_PART}(?:/{_PATH_PART})*"
    r"(?::[\w][\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?"
)


def dns1123_label_problem(value: str) -> str | None:
    if len(value) > 63:
        return f"is {len(value)} characters; at most 63"
    if not DNS1123_LABEL.fullmatch(value):
        return "must be lowercase letters, digits and '-', starting and ending alphanumeric"
    return None


def dns1123_subdomain_problem(value: str) -> str | None:
    if len(value) > 253:
        return f"is {len(value)} characters; at most 253"
    if not DNS1123_SUBDOMAIN.fullmatch(value):
        return (
            "must be lowercase letters, digits, '-' and '.', each dot-separated part "
            "starting and ending alphanumeric"
        )
    return None


def uid_problem(value: str) -> str | None:
    if not UID.fullmatch(value):
        return "must be a lowercase UUID like 3f2c1a9e-8b7d-4c6e-9f01-23456789abcd"
    return None


def image_problem(value: str) -> str | None:
    if len(value) > 512 or not IMAGE.fullmatch(value):
        return "must be an image reference like registry.example.com/team/vllm:0.6.3[@sha256:…]"
    return None


def is_namespace(value: str) -> bool:
    return dns1123_label_problem(value) is None


def is_object_name(value: str) -> bool:
    """Pod, DaemonSet and Node names are DNS-1123 subdomains."""
    return dns1123_subdomain_problem(value) is None
