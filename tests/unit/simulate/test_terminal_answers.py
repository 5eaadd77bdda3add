"""What ``kubesched simulate`` prints in a terminal, read as a user reads it: widths that follow the
terminal, readable quantities, every input pod accounted for, each preemption listed, ``-o wide``,
one section per profile and ``--explain`` near misses first (issue 29 item 5)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kubesched.api.readable import readable_bytes, readable_milli_cpu, readable_quantity
from kubesched.cli import main

GI = 2**30


def run(*args: str | Path, columns: int | None = 100) -> Result:
    env: dict[str, str | None] = {"COLUMNS": None if columns is None else str(columns)}
    result = CliRunner().invoke(main, ["simulate", "-q", *map(str, args)], env=env)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


# -- width -----------------------------------------------------------------------------------------


def test_piped_output_without_columns_is_100_wide_and_long_reasons_wrap_in_their_cell() -> None:
    out = run(columns=None).stdout
    assert widest(out) <= 100
    assert "no free underlay IP" in out  # wrapped, not cut


def test_columns_sets_the_width() -> None:
    out = run(columns=160).stdout
    assert 100 < widest(out) <= 160
    assert widest(run(columns=72).stdout) <= 72


# -- quantities ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("memory", 9845650 * 2**20, "9.4Ti"),
        ("memory", 31203 * 2**20, "30.5Gi"),
        ("memory", 16 * GI, "16Gi"),
        ("memory", 384 * 2**20, "384Mi"),
        ("memory", 1000, "1000"),
        ("ephemeral-storage", 100 * GI, "100Gi"),
        ("hugepages-2Mi", 4 * 2**20, "4Mi"),
        ("cpu", 3250, "3.2"),
        ("cpu", 14100, "14.1"),
        ("cpu", 16000, "16"),
        ("cpu", 250, "250m"),
        ("cpu", 0, "0"),
        ("pods", 110, "110"),
        ("nvidia.com/gpu", 8, "8"),
    ],
)
def test_readable_quantities(resource: str, amount: int, text: str) -> None:
    assert readable_quantity(resource, amount) == text


def test_readable_negative_amounts_keep_their_sign() -> None:
    assert readable_bytes(-3 * GI) == "-3Gi"
    assert readable_milli_cpu(-1500) == "-1.5"


def test_node_table_shows_readable_cpu_and_memory() -> None:
    out = run(columns=200).stdout
    row = next(line for line in out.splitlines() if "│ worker-5 " in line)
    assert "14.1/16" in row and "35.4Gi/64Gi" in row, row
    assert "14100m" not in out and "36224Mi" not in out
