"""Reading the kill-switch file (the mounted ConfigMap key): it fails closed.

    on, true, 1, yes, engaged     on
    off, false, 0, no, nothing    off        (case and surrounding space ignored)
    the file missing              off        (the key is not in the ConfigMap)
    anything else                 on, and `unclear` says why: a word it does not know,
                                  text that does not decode, a file it cannot read (a
                                  directory, permission denied), more than 1 KiB

Text is UTF-8 unless a byte-order mark says UTF-16 or UTF-32 (an editor on Windows
writes one), so "on" saved as UTF-16 is on. A switch that cannot be read must never
let actions through, nor stop the service: the runtime logs it, shows it in `/readyz`
and `remediator_kill_switch_unclear`, and keeps running with the switch on.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from pathlib import Path

ON = frozenset({"on", "true", "1", "yes", "engaged"})
OFF = frozenset({"off", "false", "0", "no", ""})

_MOST = 1024  # bytes read at most

# Longest first: a UTF-32-LE mark begins with the UTF-16-LE one.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


@dataclass(frozen=True, slots=True)
class SwitchReading:
    engaged: bool
    said: str  # what the file says, for the note on every suppression
    unclear: str | None = None  # why it was not a clear on or off (then engaged)


def decode(data: bytes) -> str:
    """The file's text: by its byte-order mark, else UTF-8. UnicodeDecodeError if neither."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(encoding)
    return data.decode("utf-8")


def read_switch(path: str) -> SwitchReading:
    try:
        with Path(path).open("rb") as f:
            data = f.read(_MOST + 1)  # a switch is a word: never a whole device read
    except FileNotFoundError:
        return SwitchReading(False, "nothing (no file)")
    except OSError as exc:
        return SwitchReading(True, "nothing readable", f"unreadable: {exc.strerror or exc}")
    if len(data) > _MOST:
        return SwitchReading(True, "too much", f"longer than {_MOST} bytes: not a switch")
    try:
        text = decode(data).strip().lower()
    except UnicodeDecodeError as exc:
        why = f"not text: {exc.reason} at byte {exc.start} (UTF-8, or a BOM for UTF-16/32)"
        return SwitchReading(True, "nothing readable", why)
    if text in ON:
        return SwitchReading(True, text)
    if text in OFF:
        return SwitchReading(False, text or "nothing")
    shown = text[:40].encode("unicode_escape").decode()  # a NUL or control byte shown, not sent
    return SwitchReading(True, shown, f"says neither on nor off: {shown!r}")
