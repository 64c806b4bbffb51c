"""The one way a step fails: an exit code, a short machine-readable reason, a sentence."""

from __future__ import annotations

from remediator.steps.report import ExitCode


class StepError(Exception):
    def __init__(self, code: ExitCode, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.reason = reason  # e.g. "not_found", "api_error", "nvidia_smi_failed"
        self.detail = detail
