"""Go durations: ``time.ParseDuration`` (``"15s"``, ``"1m30s"``, ``"100ms"``) into seconds,
``time.Duration.String()`` back, and ``GoDuration``, a ``metav1.Duration`` field held as seconds (the
scheduler configuration and plugin args)."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Final

from pydantic import BeforeValidator, PlainSerializer

__all__ = ["GoDuration", "GoDurationString", "go_duration", "parse_go_duration"]

# time.ParseDuration units, in seconds.
_UNITS: Final[dict[str, float]] = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # U+00B5 micro sign
    "μs": 1e-6,  # U+03BC Greek mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART: Final = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(value: str) -> float:
    """Seconds in a Go ``time.ParseDuration`` string such as ``"15s"``, ``"1m30s"``, ``"-1.5h"``.

    As Go, a unit is required on every number except for a bare ``"0"``.
    """
    s = value
    sign = 1.0
    if s[:1] in "+-" and s:
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f"invalid duration {value!r}")
    total = 0.0
    pos = 0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if m is None:
            raise ValueError(f"invalid duration {value!r}")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return sign * total


_DURATION_HINT: Final = 'expected a Go duration string such as "15s", "1m30s" or "100ms" (units ns, us, ms, s, m, h)'


def _duration(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, str):
        raise ValueError(_DURATION_HINT)
    try:
        return parse_go_duration(v)
    except ValueError:
        raise ValueError(_DURATION_HINT) from None


#: A Go ``metav1.Duration`` in configuration, held as seconds.
GoDuration = Annotated[float, BeforeValidator(_duration)]

def go_duration(seconds: float) -> str:
    """Seconds as Go's ``time.Duration.String()`` (``1m30s``, ``100ms``, ``0s``)."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000:
        return f"{sign}{ns}ns"
    if ns < 1_000_000:
        return f"{sign}{_trim(ns / 1e3)}µs"
    if ns < 1_000_000_000:
        return f"{sign}{_trim(ns / 1e6)}ms"
    h, rem = divmod(ns, 3_600_000_000_000)
    m, rem = divmod(rem, 60_000_000_000)
    out = sign
    if h:
        out += f"{h}h"
    if h or m:
        out += f"{m}m"
    return out + f"{_trim(rem / 1e9)}s"


def _trim(x: float) -> str:
    if math.isclose(x, round(x)):
        return str(round(x))
    return f"{x:.9f}".rstrip("0").rstrip(".")


#: A ``GoDuration`` written back as Go prints it (``"10m0s"``) when dumped to JSON, as upstream
#: encodes a ``metav1.Duration`` (e.g. plugin args that are compared with kube-scheduler's).
GoDurationString = Annotated[GoDuration, PlainSerializer(go_duration, return_type=str, when_used="json")]
