"""The standard library the simulations use in the browser: Pyodide's own,
trimmed to the modules the simulations import, and compiled ahead of time,
so that starting Python downloads less and compiles nothing. The site
serves it as static/sims/stdlib.zip, in place of Pyodide's
python_stdlib.zip (2.5 MB of source, compiled at every start).

make() runs at build time inside Pyodide itself (tools/stdlib.mjs starts it
under Node), because only Pyodide's Python writes the bytecode its Python
reads. It measures what a fresh interpreter imports: what Pyodide imports
to start, what the simulations' API imports, what each simulation imports
when it is made, and every module the course's loaded files name in an
import statement, wherever it stands (an import inside a function runs
late, or only on some path). That is the trimmed library. Making it takes
a few seconds; the build keeps it in node_modules/.cache/course-stdlib/,
by a hash of its inputs (Pyodide, tools/stdlib.mjs, and every .py that
goes into course.zip: package.make_stdlib), so most builds reuse it.

A module the measure missed is still found: install() puts a finder last
on sys.meta_path which, the first time a module of the whole library is
asked for and not found, fetches Pyodide's whole standard library and puts
it after the trimmed one on sys.path. Slower, never wrong.

Only sys is imported at the top: what make() imports itself must not count
as something the simulations need.
"""
import sys

WHOLE_NAMES = "whole-stdlib-names.txt"   # in the trimmed zip: the whole library's top-level names
ALWAYS = ("encodings.", "zipfile")       # codecs are looked up by name; install() reads zips


def make(whole, out, course):
    """Write to OUT a zip of the modules of the stdlib zip WHOLE that the
    simulations need, as sourceless .pyc files; COURSE is the repository's
    root (tools/ and code/)."""
    needed = measure(course)
    import importlib.util
    import marshal
    import zipfile
    source = zipfile.ZipFile(whole)
    kept = []
    tops = set()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as trimmed:
        for info in source.infolist():
            if not info.filename.endswith(".py"):
                continue
            name = module_name(info.filename)
            tops.add(name.split(".")[0])
            if name in needed or name.startswith(ALWAYS):
                code = compile(source.read(info), f"{whole}/{info.filename}", "exec",
                               dont_inherit=True)
                # A .pyc's header: magic, flags (0: checked by timestamp), the
                # source's mtime and size. With no source beside it, neither
                # is checked.
                header = importlib.util.MAGIC_NUMBER + bytes(12)
                member = zipfile.ZipInfo(info.filename + "c", info.date_time)
                member.compress_type = zipfile.ZIP_DEFLATED
                trimmed.writestr(member, header + marshal.dumps(code))
                kept.append(name)
        trimmed.writestr(WHOLE_NAMES, "\n".join(sorted(tops)))
    return f"kept {len(kept)} modules, of {len(tops)} top-level names in the whole library"


def measure(course):
    """The names of the modules a fresh interpreter holds once the
    simulations are imported and each is made, and the course's files they
    loaded name in their imports. The folder course must be on sys.path
    (tools/stdlib.mjs puts it there), so that the package tools is found."""
    import importlib
    from tools.sims import api
    for name in api.SIMS:
        api.call(f'{{"sim": "{name}", "instance": "measure", "method": "new"}}')
        api.call(f'{{"sim": "{name}", "instance": "measure", "method": "close"}}')
    ours = [module.__file__ for module in list(sys.modules.values())
            if (getattr(module, "__file__", None) or "").startswith(f"{course}/")]
    for name in sorted(named_imports(ours)):
        try:
            importlib.import_module(name)
        except ImportError:
            pass                 # an optional import, as the code itself allows
    return set(sys.modules)


def named_imports(paths):
    """Every module an absolute import statement in these files names."""
    import ast
    names = set()
    for path in paths:
        with open(path, encoding="utf-8") as file:
            tree = ast.parse(file.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names.add(node.module)
    return names


def module_name(filename):
    """json/decoder.py -> json.decoder; json/__init__.py -> json."""
    name = filename[:-len(".py")].replace("/", ".")
    return name.removesuffix(".__init__")


class WholeLibrary:
    """The finder of last resort: a module of the whole standard library
    that the trimmed one lacks is found in the whole library, fetched the
    first time one is asked for."""

    def __init__(self, trimmed, fetch_whole):
        import zipfile
        self.trimmed = trimmed
        self.names = set(zipfile.ZipFile(trimmed).read(WHOLE_NAMES).decode().split())
        self.fetch_whole = fetch_whole
        self.whole = None            # the whole library's path, once fetched

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in self.names:
            return None
        if self.whole is None:
            self.whole = self.fetch_whole()
            sys.path.insert(sys.path.index(self.trimmed) + 1, self.whole)
        if path is not None:         # a package's submodule: look in the whole one's
            path = [entry.replace(self.trimmed, self.whole, 1) for entry in path]
        import importlib.machinery
        return importlib.machinery.PathFinder.find_spec(name, path)


TRIMMED = f"/lib/python{sys.version_info.major}{sys.version_info.minor}.zip"


def install(fetch_whole):
    """Find what the trimmed library lacks: fetch_whole() fetches the whole
    library, writes it to a file and returns the file's path."""
    sys.meta_path.append(WholeLibrary(TRIMMED, fetch_whole))
