"""Quantities for people: rounded to one decimal in the largest binary unit, the way
``kubectl top`` and ``kubectl describe node`` read, not the exact canonical form.

``format_bytes`` / ``format_milli_cpu`` (quantity.py) stay exact (``9845650Mi``, ``3880m``): they
name amounts in messages a user may copy back into a manifest. A summary row that compares 3,000
nodes wants ``9.4Ti`` and ``3.9``. Both the terminal summary and the HTML report use these.
"""

from __future__ import annotations

from typing import Final

__all__ = ["readable_bytes", "readable_milli_cpu", "readable_quantity"]

_UNITS: Final = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))
#: Resources counted in bytes (hugepages-2Mi and the like too).
_BYTE_RESOURCES: Final = ("memory", "ephemeral-storage")


def _short(v: float) -> str:
    """One decimal under 100, none above, no trailing ".0": 9.39 -> "9.4", 16.0 -> "16", 126.5 -> "126"."""
    text = f"{v:.0f}" if v >= 100 else f"{v:.1f}"
    return text.removesuffix(".0")


def readable_bytes(n: int | float) -> str:
    """Bytes in the largest binary unit not above them: 10323662438400 -> "9.4Ti",
    32717799424 -> "30.5Gi", 17179869184 -> "16Gi", 402653184 -> "384Mi", 1000 -> "1000"."""
    mag = abs(n)
    sign = "-" if n < 0 else ""
    for suffix, shift in _UNITS:
        unit = 1 << shift
        if mag >= unit:
            return f"{sign}{_short(mag / unit)}{suffix}"
    return f"{sign}{mag:.0f}"


def readable_milli_cpu(m: int | float) -> str:
    """Millicores as ``kubectl`` reads them: under one core in millicores ("250m"), else cores to
    one decimal: 3250 -> "3.2", 3880 -> "3.9", 14100 -> "14.1", 16000 -> "16"."""
    if m == 0:
        return "0"
    if abs(m) < 1000:
        return f"{m:.0f}m"
    return _short(abs(m) / 1000) if m > 0 else "-" + _short(-m / 1000)


def readable_quantity(resource: str, amount: int | float) -> str:
    """An amount of ``resource`` in the node table's units (cpu in millicores, bytes for memory,
    storage and hugepages, a count for anything else)."""
    if resource == "cpu":
        return readable_milli_cpu(amount)
    if resource in _BYTE_RESOURCES or resource.startswith("hugepages-"):
        return readable_bytes(amount)
    return f"{amount:,.0f}" if float(amount).is_integer() else f"{amount:,.2f}"
