"""What the course asks of a learner: lines typed and words read.

    .venv/bin/python tools/load.py

Lines typed are counted from the guide's includes, as a learner meets them:
every line of code/ that an include shows, once, however often it is shown.
A file's lines typed between two runs of it (a console block whose commands
name it; a run of chaos.py runs every capstone file) make one sitting. Given files (named *_given.py) are downloaded,
never typed. Words are the prose of each chapter, outside fenced blocks.
Prints numbers; never passes or fails.
"""
import re
import sys
from collections import defaultdict

from tools import guide
from tools.harness.catalogue import GUIDE, OPTIONAL, ROOT, exercise_of, files_run

GIVEN = re.compile(r"_given\.py$")


def shown_lines(block):
    """The line numbers of its file that an include block shows."""
    text, first = guide.include(block, ROOT)
    return set(range(first, first + len(text.splitlines())))


def sittings(blocks):
    """{file: [lines typed at each sitting]}, in the order the guide shows them."""
    seen, pending, done = defaultdict(set), defaultdict(set), {}
    for block in blocks:
        if "include" in block.attributes:
            name = block.attributes["include"].removeprefix("code/")
            if not GIVEN.search(name):
                done.setdefault(name, [])
                new = shown_lines(block) - seen[name]
                seen[name] |= new
                pending[name] |= new
        elif "console" in block.classes:
            for name in files_run(exercise_of(block)):
                if pending[name]:
                    done[name].append(len(pending.pop(name)))
    for name, lines in pending.items():
        if lines:
            done[name].append(len(lines))
    return done


def words_per_chapter(text):
    """{chapter heading: words of prose outside fenced blocks}."""
    fenced = set()
    for block in guide.blocks(text):
        fenced.update(range(block.line, block.line + len(block.body) + 2))
    words, chapter = {}, None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("# "):
            chapter = line[2:]
            words[chapter] = 0
        elif chapter and number not in fenced and not line.startswith(":::"):
            words[chapter] += len(line.split())
    return words


def main():
    text = GUIDE.read_text(encoding="utf-8")
    typed = sittings(guide.blocks(text))
    print(f"{'lines typed':<34}{'in all':>8}  sittings")
    totals = {"required": 0, "optional": 0}
    for name, each in typed.items():
        kind = "optional" if name in OPTIONAL else "required"
        totals[kind] += sum(each)
        print(f"  {name + (' (optional)' if kind == 'optional' else ''):<32}{sum(each):>8}  "
              f"{' + '.join(map(str, each))}")
    for kind, total in totals.items():
        print(f"{kind + ' path':<34}{total:>8}")
    print(f"{'longest sitting':<34}{max(max(each) for each in typed.values()):>8}")
    print()
    print(f"{'words of prose':<34}{'words':>8}")
    for chapter, count in words_per_chapter(text).items():
        print(f"  {chapter[:32]:<32}{count:>8}")


if __name__ == "__main__":
    sys.exit(main())
