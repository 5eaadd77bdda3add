"""Run a benchmark: ``python -m bench [simulator] [--nodes N --pods M --rounds R]``."""

from __future__ import annotations

import sys

from bench import simulator


def main(argv: list[str]) -> int:
    name = argv[0] if argv and not argv[0].startswith("-") else "simulator"
    rest = argv[1:] if argv and not argv[0].startswith("-") else argv
    if name == "simulator":
        return simulator.main(rest)
    print(f"unknown benchmark {name!r}; known: simulator", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
