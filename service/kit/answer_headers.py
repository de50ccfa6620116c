"""Headers that carry what an answer's body may have no room for: its warnings, and the query
parameters it ignored.

Autoscalers and spreadsheets read a bare number (`format=text`), a CSV row or a Prometheus
gauge: the warnings of the JSON answer would never reach them. Every capacity answer (and the
pictures drawn from one) also says them in `Kvplan-Warnings`, and names the query parameters it
did not read in `Kvplan-Ignored-Parameters`, so that a misspelt or foreign name is seen.

Encodings, header-safe (visible ASCII) whatever the text:

- `Kvplan-Warnings`: a Structured Field List (RFC 9651 §3.1) of Display Strings (RFC 9651
  §3.3.8), one per warning, in the answer's order: `%"` + the warning's UTF-8 bytes, with `%`,
  `"`, and every byte outside printable ASCII written `%xx` (lowercase hex) + `"`. Absent when
  there is no warning.
- `Kvplan-Ignored-Parameters`: the ignored names, `, `-separated, each percent-encoded as in a
  URL's query (UTF-8; `,`, `%` and spaces escaped): `_, utm_source`. Absent when none was.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import quote

WARNINGS_HEADER: Final = "Kvplan-Warnings"
IGNORED_HEADER: Final = "Kvplan-Ignored-Parameters"

WARNINGS_HEADER_DOC: Final[dict[str, Any]] = {
    "description": "The answer's warnings (the JSON `warnings`), for every format: an RFC 9651 "
    'list of Display Strings, `%"sized as 0.33.0 ..."`, where `%`, `"` and non-ASCII bytes '
    "are `%xx` of UTF-8. Absent when there are none.",
    "schema": {"type": "string"},
}
IGNORED_HEADER_DOC: Final[dict[str, Any]] = {
    "description": "Query parameters the answer did not read (a cache-busting `_`, "
    "`utm_source`), comma-separated, each percent-encoded as in a URL. Absent when none.",
    "schema": {"type": "string"},
}
# What an answer's OpenAPI `headers` add.
ANSWER_HEADERS_DOC: Final[dict[str, Any]] = {
    WARNINGS_HEADER: WARNINGS_HEADER_DOC,
    IGNORED_HEADER: IGNORED_HEADER_DOC,
}

# The bytes a Display String escapes: `"`, `%`, and all outside printable ASCII (0x20-0x7e).
_ESCAPED: Final = re.compile(rb"[^\x20\x21\x23\x24\x26-\x7e]")
_ESCAPED_TEXT: Final = re.compile(r"[^\x20\x21\x23\x24\x26-\x7e]")  # the same, as text


def _escape(byte: re.Match[bytes]) -> bytes:
    return b"%%%02x" % byte[0][0]


def display_string(text: str) -> str:
    """One RFC 9651 Display String (§4.1.11, serializing): `%"..."`, percent-escaping `%`, `"`
    and each byte of the UTF-8 encoding outside printable ASCII (lowercase hex). Only those
    bytes are visited: a warning is encoded once per answer computed, on the hot path's miss."""
    if _ESCAPED_TEXT.search(text) is None:  # most warnings: nothing to escape
        return f'%"{text}"'
    return '%"' + _ESCAPED.sub(_escape, text.encode("utf-8")).decode("ascii") + '"'


def warnings_value(warnings: Sequence[str]) -> str | None:
    """The `Kvplan-Warnings` value of these warnings; None for none."""
    return ", ".join(display_string(w) for w in warnings) if warnings else None


def ignored_value(names: Sequence[str]) -> str | None:
    """The `Kvplan-Ignored-Parameters` value of these names; None for none."""
    return ", ".join(quote(name, safe="") for name in names) if names else None


def answer_headers(warnings: Sequence[str], ignored: Sequence[str] = ()) -> dict[str, str]:
    """Both headers, where they have something to say."""
    headers = {}
    said = warnings_value(warnings)
    if said is not None:
        headers[WARNINGS_HEADER] = said
    names = ignored_value(ignored)
    if names is not None:
        headers[IGNORED_HEADER] = names
    return headers
