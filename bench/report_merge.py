"""Keep BENCHMARKS.md's hand-written sections when ``python -m bench report`` regenerates it.

Most of BENCHMARKS.md is written by hand (runs the result files cannot describe: side-by-side
tables across commits, profiles, the reference simulator). ``bench report`` used to overwrite the
whole file, so one run of it would have dropped them. Now the file is split into sections at its
Markdown headings: a section whose heading the report generates is replaced by the new text, and
every other section stays where it was, after the generated section it followed."""

from __future__ import annotations

Section = tuple[str | None, list[str]]  # (heading line, or None for the text before the first; body)


def split_sections(text: str) -> list[Section]:
    """Sections at Markdown headings (``#`` to ``######``), ignoring ``#`` lines in code fences."""
    sections: list[Section] = [(None, [])]
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("#") and line.lstrip("#").startswith(" "):
            sections.append((line.rstrip(), []))
        else:
            sections[-1][1].append(line)
    return sections


def _keys(sections: list[Section]) -> list[tuple[str | None, int]]:
    """Each section's heading and its occurrence number, so repeated headings stay apart."""
    seen: dict[str | None, int] = {}
    keys = []
    for heading, _ in sections:
        seen[heading] = seen.get(heading, 0) + 1
        keys.append((heading, seen[heading]))
    return keys


def merge(existing: str, generated: str) -> str:
    """``generated`` with each of ``existing``'s sections that it does not generate kept after the
    generated section that preceded it in ``existing`` (the preamble for those before any)."""
    new = split_sections(generated)
    new_keys = _keys(new)
    generated_keys = set(new_keys)
    kept_after: dict[tuple[str | None, int], list[Section]] = {}
    anchor: tuple[str | None, int] = (None, 1)
    old = split_sections(existing)
    for key, section in zip(_keys(old), old, strict=True):
        if key in generated_keys:
            anchor = key
        elif key != (None, 1):
            kept_after.setdefault(anchor, []).append(section)
    out: list[str] = []
    for key, (heading, body) in zip(new_keys, new, strict=True):
        for h, b in [(heading, body), *kept_after.get(key, [])]:
            if h is not None:
                out.append(h)
            out.extend(b)
    return "\n".join(out).rstrip() + "\n"
