"""Checks on every value that reaches a workflow parameter or a label.

Argo substitutes parameters textually into templates, and labels travel as one
`k=v,k=v` string, so a value is accepted only if it matches a narrow pattern:
nothing that could close a quote, start a shell expansion, add a label or open
an Argo `{{...}}` expression gets through.
"""

from __future__ import annotations

import re

from remediator.policy.names import DNS1123_LABEL as _DNS1123_LABEL
from remediator.policy.names import DNS1123_SUBDOMAIN as _DNS1123_SUBDOMAIN
from remediator.policy.names import IMAGE as _IMAGE
from remediator.policy.names import UID as _UID

_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
_INCIDENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,252}")
# Free text for humans: words, numbers and a little punctuation; no quotes,
# `$`, backticks, `;`, `|`, `&`, braces, backslashes or line breaks.
_TEXT_CHARS = r"A-Za-z0-9 ._:,=<>%/+()\[\]#@*-"
_REASON = re.compile(rf"[{_TEXT_CHARS}]{{1,512}}")
_SELECTOR_TERM = re.compile(
    r"(?:[a-z0-9.-]{1,253}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
    r"(?:(?:=|==|!=)([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?)?"
)
_PHASE = re.compile(r"[a-z][a-z_]{0,31}")
_UINT = re.compile(r"[0-9]{1,6}")
_UFLOAT = re.compile(r"[0-9]{1,6}(\.[0-9]{1,3})?")


class InvalidParameter(ValueError):
    """A value that must not reach a workflow. The message names the field and why."""


def _check(pattern: re.Pattern[str], field: str, value: str, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise InvalidParameter(f"{field}: expected a string, got {type(value).__name__}")
    if len(value) > limit or pattern.fullmatch(value) is None:
        shown = value if len(value) <= 80 else value[:77] + "..."
        raise InvalidParameter(f"{field}: {shown!r} is not {what}")
    return value


def dns1123_label(field: str, value: str) -> str:
    return _check(_DNS1123_LABEL, field, value, "a DNS-1123 label (a-z0-9-, <=63)", 63)


def dns1123_subdomain(field: str, value: str) -> str:
    return _check(_DNS1123_SUBDOMAIN, field, value, "a DNS-1123 subdomain (<=253)", 253)


def uid(field: str, value: str) -> str:
    return _check(_UID, field, value, "a Kubernetes UID (lowercase UUID)", 36)


def phase(field: str, value: str) -> str:
    return _check(_PHASE, field, value, "a cold-start phase name (a-z_)", 32)


def image(field: str, value: str) -> str:
    return _check(_IMAGE, field, value, "an image reference", 512)


def label_value(field: str, value: str) -> str:
    return _check(_LABEL_VALUE, field, value, "a label value", 63)


def incident(field: str, value: str) -> str:
    return _check(_INCIDENT, field, value, "an incident id ([A-Za-z0-9._:/-], <=253)", 253)


def reason(field: str, value: str) -> str:
    return _check(_REASON, field, value, "plain text without shell or template syntax", 512)


_UNSAFE_TEXT = re.compile(rf"[^{_TEXT_CHARS}]+")  # the complement of what _REASON accepts


def plain_text(value: str, limit: int = 512) -> str:
    """Text written for people (a decision's reason), made safe for a workflow parameter:
    whatever could close a quote, start a shell expansion or open an Argo `{{...}}`
    becomes ','. Free text is made safe, never refused: refusing would drop the action."""
    return _UNSAFE_TEXT.sub(",", value).strip(" ,")[:limit] or "see the incident"


def label_selector(field: str, value: str) -> str:
    for term in value.split(","):
        _check(_SELECTOR_TERM, field, term, "an equality label selector", 317)
    return value


def seconds(field: str, value: str) -> str:
    return _check(_UFLOAT, field, value, "a non-negative number of seconds", 10)


def count(field: str, value: str) -> str:
    return _check(_UINT, field, value, "a non-negative integer", 6)
