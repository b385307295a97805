"""Fenced blocks of guide.md as Sybil regions.

Sybil's fence lexer finds the blocks, with the offsets Sybil needs; their
info strings (```console or ```{.console edit="..."}, a form Sybil's own
code block parser does not understand) are read by tools/markup.py, the
build's reader of the guide's markup, so the two can never disagree.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from sybil import Document
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

from markup import GuideError, parse_attributes

# Keep the whole info string; the rest of the block is the source.
fence_lexer = RawFencedCodeBlockLexer(
    info_pattern=re.compile(r"(?P<info>[^\n]*)$\n", re.MULTILINE)
)

@dataclass
class Block:
    path: str                    # as shown in messages, e.g. "guide.md"
    line: int                    # line of the opening fence, counting from 1
    classes: list
    attributes: dict
    source: str                  # the lines between the fences
    start: int = 0               # character offsets in the document
    end: int = 0
    id: str = ""

    def where(self, offset=0):
        return f"{self.path}:{self.line + offset}"


def blocks_in(document, name="guide.md"):
    """Every fenced block of a sybil Document, as Blocks."""
    regions = list(fence_lexer(document))
    for region in sorted(regions, key=lambda r: r.start):
        if any(other.start < region.start and region.end <= other.end for other in regions):
            continue             # a fence shown inside a longer fence is just text
        line = document.text.count("\n", 0, region.start) + 1
        try:
            classes, attributes = parse_attributes(region.lexemes["info"].strip(), line)
        except GuideError as error:
            raise ValueError(str(error)) from None
        block_id = attributes.pop("id", "")
        yield Block(name, line, classes, attributes, str(region.lexemes["source"]),
                    region.start, region.end, block_id)


def read_blocks(text, name="guide.md"):
    return list(blocks_in(Document(text, name), name))


def read_guide(path):
    path = Path(path)
    return read_blocks(path.read_text(encoding="utf-8"), path.name)
