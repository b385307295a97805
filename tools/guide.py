"""Read guide.md's own markup: fences, attributes, divs and includes.

The one reader of the guide: the build uses it to check the guide and expand
every include before pandoc sees it; the transcript harness and the tests use
it to find the blocks they check. Every problem is reported as a GuideError
carrying the guide.md line it belongs to. It imports none of the course's
other modules: the build hands it the simulations' names, which it checks,
so the harness, grading and tools/load.py read the guide without loading
tools/sims/ (tests/test_guide.py starts a fresh Python to make sure).
"""
import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

# ---- The course's markup: all that guide.md may say beyond pandoc's own,
# listed here and nowhere else. expand() checks the divs and the includes,
# the harness runs the console blocks, and blocks.lua renders them all (a
# test holds blocks.lua's own lists to these). CONTRIBUTING.md explains each.
DIV_CLASSES = {"check", "answer", "sim", "python"}     # ::: check, ::: {.sim name="race"}
INCLUDE_ATTRS = {"include", "pyobject", "from", "to"}  # ```{.python include="code/x.py"}
LISTING_START = "startFrom"      # added by expand(): the file's line a listing starts at
CONSOLE_ATTRS = {"database", "edit", "session", "terminal", "timewarp", "timings"}
SIM_MOUNT = "sim-mount"          # the class of the element blocks.lua leaves for a sim

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>.*?)\s*$")
DIV = re.compile(r"^(?P<colons>:{3,})\s*(?P<info>.*?)\s*:*\s*$")
ATTR_TOKEN = re.compile(
    r'\s*(?:\.(?P<cls>[\w-]+)|#(?P<id>[\w-]+)'
    r'|(?P<key>[\w-]+)=(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s"}]+)))')


class GuideError(Exception):
    def __init__(self, line, message):
        super().__init__(f"guide.md:{line}: {message}")
        self.line = line


@dataclass
class Block:
    """A fenced code block as written in guide.md."""
    line: int                     # line of the opening fence, counting from 1
    indent: str
    fence: str
    classes: list
    attributes: dict              # all but the id
    id: str = ""
    body: list = field(default_factory=list)   # lines between the fences, without the indent
    path: str = "guide.md"        # as messages show it
    start: int = 0                # character offsets in the text: the opening
    end: int = 0                  # fence's line, to the end of the closing fence

    @property
    def source(self):
        """The lines between the fences, as text."""
        return "".join(line + "\n" for line in self.body)

    def where(self, offset=0):
        return f"{self.path}:{self.line + offset}"


def parse_attributes(info, line):
    """Parse `python` or `{.python include="x" #id}` into (classes, attrs)."""
    if not info:
        return [], {}
    if not info.startswith("{"):
        return [info.split()[0]], {}
    if not info.endswith("}"):
        raise GuideError(line, f"attribute list not closed: {info}")
    inner, classes, attrs, pos = info[1:-1], [], {}, 0
    while inner[pos:].strip():
        match = ATTR_TOKEN.match(inner, pos)
        if not match:
            raise GuideError(line, f"cannot read attributes at {inner[pos:]!r}")
        if match["cls"]:
            classes.append(match["cls"])
        elif match["id"]:
            attrs["id"] = match["id"]
        else:
            value = match["quoted"] if match["quoted"] is not None else match["bare"]
            attrs[match["key"]] = re.sub(r"\\(.)", r"\1", value)
        pos = match.end()
    return classes, attrs


def scan(text, path="guide.md"):
    """Yield ('code', Block), ('div', line, info) and ('end', line, info)
    events in order: a div's end gives the line of its closing `:::` and the
    info of its opening.

    A fence shown inside a longer fence is just text of that block.
    Raises GuideError for an unclosed fence or unbalanced divs."""
    open_divs, block, offset = [], None, 0
    for number, raw in enumerate(text.splitlines(keepends=True), 1):
        at, offset = offset, offset + len(raw)
        row = raw.splitlines()[0]
        if block:
            stripped = row[len(block.indent):] if row.startswith(block.indent) else row.lstrip()
            if (stripped.startswith(block.fence[0] * len(block.fence))
                    and not stripped.strip(block.fence[0]).strip()):
                block.end = at + len(row)
                yield "code", block
                block = None
            else:
                block.body.append(stripped)
            continue
        fence = FENCE.match(row)
        if fence:
            classes, attributes = parse_attributes(fence["info"], number)
            block = Block(number, fence["indent"], fence["fence"], classes, attributes,
                          attributes.pop("id", ""), path=path, start=at)
            continue
        div = DIV.match(row)
        if div:
            if div["info"]:
                open_divs.append((number, div["info"]))
                yield "div", number, div["info"]
            elif open_divs:
                yield "end", number, open_divs.pop()[1]
            else:
                raise GuideError(number, "':::' closes a div that was never opened")
    if block:
        raise GuideError(block.line, "code block is never closed")
    if open_divs:
        raise GuideError(open_divs[-1][0], "div is never closed with ':::'")


def blocks(text, path="guide.md"):
    """The fenced code blocks of a guide's text, in order."""
    return [event[1] for event in scan(text, path) if event[0] == "code"]


def read_guide(path):
    """The fenced code blocks of the guide at path."""
    path = Path(path)
    return blocks(path.read_text(encoding="utf-8"), path.name)


def check_div(line, info, sim_names):
    classes, attrs = parse_attributes(info if info.startswith("{") else "{." + info + "}", line)
    unknown = " ".join(sorted(set(classes) - DIV_CLASSES))
    if unknown or not classes:
        raise GuideError(line, f"unknown div class {unknown or info!r}; "
                               f"known: {', '.join(sorted(DIV_CLASSES))}")
    if "sim" in classes and attrs.get("name") not in sim_names:
        raise GuideError(line, f"unknown simulation name {attrs.get('name')!r}; "
                               f"known: {', '.join(sorted(sim_names))}")


def is_python_box(info):
    """Whether a div's info opens a "The Python you need" box: `::: python`."""
    return info.strip("{} ").split()[0].lstrip(".") == "python"


def check_box_block(block):
    """A `python` box holds its example (a `python` block) and what the example
    prints (an `output` block), and no include: a listing is not an aside."""
    if block.classes[:1] not in (["python"], ["output"]) or block.attributes:
        raise GuideError(block.line, "a `python` box holds only its example, "
                                     "```python, and what it prints, ```output")


def python_boxes(text):
    """Each `python` box of the guide as (line, text, [blocks]): the line of its
    `::: python`, the Markdown between its fences, and its code blocks."""
    lines, boxes, found = text.splitlines(), [], []
    for event in scan(text):
        if event[0] == "div" and is_python_box(event[2]):
            boxes.append((event[1], []))
        elif event[0] == "end" and is_python_box(event[2]):
            line, blocks = boxes.pop()
            found.append((line, "\n".join(lines[line:event[1] - 1]), blocks))
        elif event[0] == "code" and boxes:
            boxes[-1][1].append(event[1])
    return sorted(found, key=lambda box: box[0])


def include(block, root):
    """Return (text, first_line) of the file part an include block names."""
    line, attrs = block.line, block.attributes
    unknown = set(attrs) - INCLUDE_ATTRS
    if unknown:
        raise GuideError(line, f"unknown include attribute {', '.join(sorted(unknown))}")
    if any(body.strip() for body in block.body):
        raise GuideError(line, "an include block must be empty: the build fills it")
    path = root / attrs["include"]
    if not path.is_file():
        raise GuideError(line, f"included file not found: {attrs['include']}")
    source = path.read_text(encoding="utf-8").splitlines()
    first, last = 1, len(source)
    if "pyobject" in attrs and ("from" in attrs or "to" in attrs):
        raise GuideError(line, "use pyobject= or from=/to=, not both")
    if "pyobject" in attrs:
        first, last = find_object(path, attrs["pyobject"], line)
    elif "from" in attrs or "to" in attrs:
        first, last = find_range(path, source, attrs, line)
    return "\n".join(source[first - 1:last]), first


def names(node):
    """What a statement is called in pyobject=, from= and to=: a def's or a
    class's name, `NAME` for `NAME = ...`, `NAME +=` for `NAME += ...`, an
    import by its text (`import time`), and `__main__` for the
    `if __name__ == "__main__":` at a file's end."""
    if isinstance(node, ast.Assign):
        return [target.id for target in node.targets if isinstance(target, ast.Name)]
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
        return [f"{ast.unparse(node.target)} +="]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [ast.unparse(node)]
    if isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'":
        return ["__main__"]
    return [getattr(node, "name", None)]


def statements(path, line):
    """The top-level statements of a Python file."""
    try:
        return ast.parse(path.read_text(encoding="utf-8"), str(path)).body
    except SyntaxError as error:
        raise GuideError(line, f"cannot parse {path.name}: {error}") from None


def find(path, dotted, line, attr="pyobject"):
    """The one statement a name calls (Class.method looks inside the class).
    A name no statement has, or two statements have, is a GuideError."""
    scope, rest = statements(path, line), dotted
    while True:
        inside = re.fullmatch(r"(\w+)\.(.+)", rest)
        name, rest = (inside[1], inside[2]) if inside else (rest, "")
        found = [node for node in scope if name in names(node)]
        if not found:
            raise GuideError(line, f"{attr} {dotted!r} not found in {path.name}")
        if len(found) > 1:
            raise GuideError(line, f"{attr} {dotted!r} is ambiguous in {path.name}: it names "
                                   f"lines {', '.join(str(node.lineno) for node in found)}")
        if not rest:
            return found[0]
        scope = getattr(found[0], "body", [])


def first_line(node):
    """Where a statement starts: at its first decorator, if it has one."""
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


def last_line(source, node):
    """Where a statement ends: at its last line, or at the comment lines just
    below it that are indented deeper, carrying on its last line's comment."""
    last = node.end_lineno
    while (last < len(source) and source[last].lstrip().startswith("#")
           and len(source[last]) - len(source[last].lstrip()) > node.col_offset):
        last += 1
    return last


def find_object(path, dotted, line):
    """First and last line of a function, class, Class.method or assignment."""
    node = find(path, dotted, line)
    return first_line(node), last_line(path.read_text(encoding="utf-8").splitlines(), node)


def find_range(path, source, attrs, line):
    """First and last line of a from=/to= range: from the comment lines that
    head the from= statement (or the file's top), to the to= statement's end."""
    if "to" not in attrs:
        raise GuideError(line, "from= needs a to=: the statement the listing ends with")
    first = heading(source, find(path, attrs["from"], line, "from")) if "from" in attrs else 1
    last = last_line(source, find(path, attrs["to"], line, "to"))
    if last < first:
        raise GuideError(line, f"to={attrs['to']!r} comes before from={attrs['from']!r}")
    return first, last


def heading(source, node):
    """Where a range from this statement starts: at the first of the comment
    lines just above it at its indentation (blank lines between them
    allowed), a heading for that part of the file, or else at the statement."""
    top, indent = first_line(node), " " * node.col_offset
    for number in range(top - 1, 0, -1):
        if source[number - 1].startswith(indent + "#"):
            top = number
        elif source[number - 1].strip():
            break
    return top


def expand(text, root, sim_names):
    """Check guide.md and return (expanded Markdown, line map). sim_names
    are the simulations a `::: {.sim name=...}` may name.

    The line map gives, for each line of the expanded text, the guide.md line
    it came from, so pandoc's messages can point at the guide."""
    lines = text.splitlines()
    out, origin, done = [], [], 0

    def keep(upto):
        nonlocal done
        for number in range(done + 1, upto + 1):
            out.append(lines[number - 1])
            origin.append(number)
        done = upto

    boxes = []                    # the `python` boxes open at this point
    for event in scan(text):
        if event[0] != "code":
            if event[0] == "div":
                check_div(event[1], event[2], sim_names)
            if is_python_box(event[2]) and event[0] == "div":
                boxes.append(event[1])
            elif is_python_box(event[2]):
                boxes.pop()
            continue
        block = event[1]
        if boxes:
            check_box_block(block)
            continue
        if "include" not in block.attributes:
            if "python" in block.classes:
                raise GuideError(block.line, "Python listings are included from code/, "
                                             "never pasted: add include=\"code/…\" (only a "
                                             "`python` box may hold an example of its own)")
            elif "output" in block.classes:
                raise GuideError(block.line, "an output block belongs in a `python` box, "
                                             "after its example")
            continue
        code, first = include(block, root)
        keep(block.line - 1)
        fence = "`" * max(3, longest_run(code, "`") + 1)
        attrs = " ".join([f"#{block.id}"] * bool(block.id) +
                         [f".{c}" for c in block.classes] +
                         [f'{k}="{v}"' for k, v in block.attributes.items()] +
                         [f'{LISTING_START}="{first}"'])
        for row in [f"{fence}{{{attrs}}}", *code.splitlines(), fence]:
            out.append(block.indent + row if row else row)
            origin.append(block.line)
        done = block.line + len(block.body) + 1
    keep(len(lines))
    return "\n".join(out) + "\n", origin


def longest_run(text, char):
    runs = re.findall(re.escape(char) + "+", text)
    return max(map(len, runs), default=0)
