"""Where a footnote marker goes: the one rule the Markdown and the HTML renderings share.

A marker belongs right after its claim. A few places would change what the text around it is,
so the marker moves, the same way in both renderings:
- before trailing whitespace, so a span ending in a newline does not put its marker at the start
  of the next block;
- inside the last cell of a table row, since after the closing pipe it would make a cell of
  its own;
- never right after an odd run of backslashes, which would escape the marker;
- never inside a line's block syntax (a bullet, an item number, heading hashes, quote marks),
  which would stop being syntax: a span that ends there is taken to mean the line, and its
  marker goes at the line's end;
- out of a code block (fenced or indented): to a paragraph of its own right after the block,
  since code shows its text literally. Readers see the claim's code, then its sources, as with
  a figure and its caption;
- after a closing code fence, a thematic break or a setext underline, into a paragraph of its
  own at the same indent, since text there would change what that line is.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.rules_core.normalize import NEWLINES_RE

_STRUCTURE_CHARS = frozenset("-=*_~` \t")  # fences, thematic breaks, setext underlines
# Block structure only: where code blocks are does not depend on inline parsing (the costly half).
_ITEM_MARKER = re.compile(r"[-*+]|\d{1,9}[.)]")  # a list item's bullet or number
# A line's leading block syntax (bullets, item numbers, heading hashes, quote marks).
BLOCK_PREFIX = re.compile(rf"[ \t]*(?:(?:{_ITEM_MARKER.pattern}|#{{1,6}}|>)[ \t]*)+")
_BLOCKS = MarkdownIt("commonmark").enable("table").disable(["inline", "text_join"], True)


@dataclass(frozen=True, slots=True)
class Marker:
    """Footnote numbers to insert right after `offset` of the answer, ascending.

    With `own_line_indent` set, the marker goes in a paragraph of its own at that indent.
    """

    offset: int
    numbers: tuple[int, ...]
    own_line_indent: str | None = None

    def insertion(self, text: str) -> str:
        """Return what to insert at `offset` for the rendered marker text."""
        if self.own_line_indent is None:
            return text
        return f"\n\n{self.own_line_indent}{text}\n"


def group_markers(placed: Iterable[tuple[int, str | None, int]]) -> tuple[Marker, ...]:
    """Return one marker per offset from (offset, own-line indent, footnote) triples."""
    numbers_at: dict[int, set[int]] = {}
    indents: dict[int, str | None] = {}
    for offset, indent, number in placed:
        numbers_at.setdefault(offset, set()).add(number)
        indents[offset] = indent
    return tuple(
        Marker(offset, tuple(sorted(numbers_at[offset])), indents[offset])
        for offset in sorted(numbers_at)
    )


def placements_of(answer: str, spans: list[tuple[int, int]]) -> list[tuple[int, str | None]]:
    """Return where each (start, end) span's marker goes: (offset, own-line indent or None)."""
    code_blocks = _code_blocks(answer)
    block_starts = [b[0] for b in code_blocks]
    placements = []
    for start, end in spans:
        end = _out_of_block_prefix(answer, end)
        block = _enclosing(code_blocks, block_starts, end) if code_blocks else None
        placements.append(_placement(answer, start, end, block))
    return placements


def _placement(
    answer: str, start: int, end: int, block: tuple[int, int, str | None] | None
) -> tuple[int, str | None]:
    if block is not None:
        block_end, code_indent = block[1], block[2]
        if code_indent is not None:  # indented code: a paragraph must be out-dented below it
            return block_end, code_indent
        return block_end, _structural_line_indent(answer, block_end) or ""
    offset = _before_blanks(answer, start, end)
    if offset > start and answer[offset - 1] == "|" and _ends_line(answer, offset):
        offset = _before_blanks(answer, start, offset - 1)
    backslashes = 0
    while offset - backslashes > 0 and answer[offset - backslashes - 1] == "\\":
        backslashes += 1
    offset -= backslashes % 2
    return offset, _structural_line_indent(answer, offset)


def _out_of_block_prefix(answer: str, offset: int) -> int:
    """Return the end of the line when `offset` falls within its leading block syntax."""
    line_start = answer.rfind("\n", 0, offset) + 1
    prefix = BLOCK_PREFIX.match(answer, line_start)
    if prefix is None or offset > prefix.end() or offset == line_start:
        return offset
    line_end = answer.find("\n", offset)
    return len(answer) if line_end == -1 else line_end


def _code_blocks(answer: str) -> list[tuple[int, int, str | None]]:
    """Return (start, end, indent) of each code block: end is the end of its last line.

    `indent` is None for a fenced block (its closing fence line is structural) and the
    out-dented indent for an indented block.
    """
    if not _may_have_code(answer):
        return []
    # Lines as the parser counts them (a lone \r and \r\n break lines too): its own pattern.
    line_starts = [0] + [m.end() for m in NEWLINES_RE.finditer(answer)]
    blocks = []
    for token in _BLOCKS.parse(answer):
        if token.type not in {"fence", "code_block"} or token.map is None:
            continue
        first, last = token.map[0], token.map[1] - 1
        start = line_starts[first]
        end = line_starts[last + 1] - 1 if last + 1 < len(line_starts) else len(answer)
        while end > start and answer[end - 1] in "\r\n":
            end -= 1
        indent = None
        if token.type == "code_block":
            line = answer[start : line_starts[first + 1] if first + 1 < len(line_starts) else None]
            indent = _container_indent(line)
        blocks.append((start, end, indent))
    return blocks


def _container_indent(line: str) -> str:
    """Return the indent that keeps a line in the quote or list item where an indented code
    block starts on `line`: its prefix less the code's own indent, with any item number or
    bullet turned into spaces (a line at a lesser indent would end the item, and the lines of
    the item after it would change meaning: its indented text would turn into code)."""
    container = BLOCK_PREFIX.match(line)
    leading = container.group() if container else line[: len(line) - len(line.lstrip(" \t"))]
    outdented = leading[:-4] if leading.endswith("    ") else leading[:-1]
    return _ITEM_MARKER.sub(lambda marker: " " * len(marker.group()), outdented)


def _may_have_code(answer: str) -> bool:
    """Whether `answer` may hold a code block: a fence, or four spaces or a tab, which an
    indented block needs wherever it starts (a quote, a list item).

    Substring tests rather than a regex: a pattern that can start at a line start is tried at
    every position of the answer, 20-40 ns a character, and this runs on every finished answer.
    """
    return "```" in answer or "~~~" in answer or "    " in answer or "\t" in answer


def _enclosing(blocks: list[tuple[int, int, str | None]], starts: list[int], offset: int):
    """Return the code block whose text contains `offset`, if any."""
    index = bisect.bisect_right(starts, offset) - 1
    if index >= 0 and blocks[index][0] < offset <= blocks[index][1]:
        return blocks[index]
    return None


def _before_blanks(answer: str, start: int, offset: int) -> int:
    while offset > start and answer[offset - 1].isspace():
        offset -= 1
    return offset


def _structural_line_indent(answer: str, offset: int) -> str | None:
    """Return the indent of the line `offset` ends if it is structural, else None."""
    start = offset
    while start > 0 and answer[start - 1] in _STRUCTURE_CHARS:
        start -= 1
    line = answer[start:offset]
    if (
        (start > 0 and answer[start - 1] != "\n")
        or not line.strip()
        or not _ends_line(answer, offset)
    ):
        return None
    return line[: len(line) - len(line.lstrip(" \t"))]


def _ends_line(answer: str, offset: int) -> bool:
    """Return True when only blanks follow `offset` on its line."""
    end = offset
    while end < len(answer) and answer[end] in " \t\r":
        end += 1
    return end == len(answer) or answer[end] == "\n"
