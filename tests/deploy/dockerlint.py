"""A small, honest Dockerfile checker (hadolint is not available here).

It checks what matters for this image and says so by rule name: multi-stage, a
non-root USER in the final stage, base images pinned (exact version or digest,
never `latest`), no secrets baked in, and a HEALTHCHECK or a documented reason
for HEALTHCHECK NONE.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE_?KEY|CREDENTIAL)", re.I)
SECRET_VALUE = re.compile(
    r"(xox[abpr]-[0-9A-Za-z-]+|gh[pousr]_[0-9A-Za-z]{20,}|AKIA[0-9A-Z]{16}|-----BEGIN)"
)
SECRET_FILE = re.compile(
    r"(^|/)(\.env|id_rsa|id_ed25519|[^ ]*\.pem|[^ ]*\.key|\.netrc|\.npmrc|\.pypirc)$"
)
PINNED_TAG = re.compile(r":[^:@/]*\d+\.\d+[^:@/]*$")  # a version with at least major.minor
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


@dataclass(frozen=True, slots=True)
class Instruction:
    line: int
    keyword: str
    args: str
    comment_above: str


@dataclass(slots=True)
class Stage:
    image: str
    alias: str | None
    line: int
    body: list[Instruction] = field(default_factory=list)


def parse(text: str) -> list[Instruction]:
    out: list[Instruction] = []
    comments: list[str] = []
    buf, start = "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            comments = comments + [stripped.lstrip("# ")] if stripped else []
            continue
        if stripped.startswith("#"):  # a comment inside a continued instruction
            continue
        if not buf:
            start = n
        buf += " " + stripped.rstrip("\\").strip() if buf else stripped.rstrip("\\").strip()
        if not stripped.endswith("\\"):
            keyword, _, args = buf.partition(" ")
            out.append(Instruction(start, keyword.upper(), args.strip(), " ".join(comments)))
            buf, comments = "", []
    return out


def stages(instructions: list[Instruction]) -> list[Stage]:
    result: list[Stage] = []
    for ins in instructions:
        if ins.keyword == "FROM":
            parts = [p for p in ins.args.split() if not p.startswith("--")]
            alias = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else None
            result.append(Stage(parts[0], alias, ins.line))
        elif result:
            result[-1].body.append(ins)
    return result


def lint(text: str) -> list[str]:
    """Problems as 'rule: message (line N)'; an empty list means the Dockerfile passes."""
    instructions = parse(text)
    found = stages(instructions)
    if not found:
        return ["no-from: no FROM instruction"]
    problems = _multistage(found) + _pinned(found) + _user(found[-1]) + _healthcheck(found[-1])
    return problems + _secrets(instructions)


def _multistage(found: list[Stage]) -> list[str]:
    if len(found) < 2:
        return ["multi-stage: a single stage ships the build toolchain"]
    copies = [i for i in found[-1].body if i.keyword == "COPY" and "--from=" in i.args]
    return [] if copies else ["multi-stage: the final stage copies nothing from an earlier stage"]


def _pinned(found: list[Stage]) -> list[str]:
    aliases = {s.alias for s in found if s.alias}
    out = []
    for st in found:
        if st.image in aliases or st.image == "scratch":
            continue
        if st.image.endswith(":latest") or ":latest@" in st.image:
            out.append(f"pinned-base: {st.image} uses latest (line {st.line})")
        elif "$" in st.image:
            out.append(f"pinned-base: {st.image} is chosen by a build arg (line {st.line})")
        elif not (DIGEST.search(st.image) or PINNED_TAG.search(st.image)):
            out.append(
                f"pinned-base: {st.image} has no exact version tag or digest (line {st.line})"
            )
    return out


def _user(final: Stage) -> list[str]:
    users = [i for i in final.body if i.keyword == "USER"]
    if not users:
        return ["non-root: the final stage has no USER (runs as root)"]
    name = users[-1].args.split(":")[0]
    if name in ("root", "0"):
        return [f"non-root: the final stage runs as {users[-1].args} (line {users[-1].line})"]
    return []


def _healthcheck(final: Stage) -> list[str]:
    checks = [i for i in final.body if i.keyword == "HEALTHCHECK"]
    if not checks:
        return ["healthcheck: no HEALTHCHECK, and no documented HEALTHCHECK NONE"]
    last = checks[-1]
    if last.args.upper() == "NONE" and len(last.comment_above) < 20:
        return [
            f"healthcheck: HEALTHCHECK NONE needs a comment above it saying why (line {last.line})"
        ]
    return []


def _secrets(instructions: list[Instruction]) -> list[str]:
    out = []
    for ins in instructions:
        if SECRET_VALUE.search(ins.args):
            out.append(f"no-secrets: a credential literal on line {ins.line}")
        if ins.keyword in ("ENV", "ARG"):
            for name, _value in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)(?:[= ]\s*(\S+))?", ins.args):
                if SECRET_NAME.search(name):
                    out.append(
                        f"no-secrets: {ins.keyword} {name} bakes a secret in (line {ins.line})"
                    )
        if ins.keyword in ("COPY", "ADD"):
            sources = [a for a in ins.args.split() if not a.startswith("--")][:-1]
            for src in sources:
                if SECRET_FILE.search(src):
                    out.append(
                        f"no-secrets: {ins.keyword} {src} copies a secret file (line {ins.line})"
                    )
        if ins.keyword == "ADD" and re.search(r"https?://", ins.args):
            out.append(
                f"no-remote-add: ADD of a URL is unchecked; fetch it in a RUN (line {ins.line})"
            )
    return out
