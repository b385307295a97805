"""What every simulation's engine is: the one class of its folder's
engine.py on Engine, with

    TASKS      {task id: what the reader is asked to do}; self.earned holds
               the ids done (never at the start), tasks() lists them
    SETTINGS   {name: kind}: what the page may set, each value checked by
               check(); a kind is (bool,), (str, choice, ...) or (int or
               float, lowest, highest)
    PAGE_STARTS_WITH
               {keyword: value}: what the page makes it with, when these
               are not its defaults. The build draws the page's first
               picture, before any Python runs, from the state() of an
               engine made so (tools/sims/package.py)
    state()    everything the page draws, as JSON-ready data, with
               "tasks": self.tasks()
    close()    frees its connections and files (nothing, by default)

and its methods marked @action: with state, all the page may call
(api.py reads them off the class). An action that is a staticmethod needs
no instance (the race's every_interleaving). Rerun is an Engine whose
whole run follows from its SETTINGS (the page changes them with its
action configure(**changes)), and program() makes a text program
(python3 -m tools.sims NAME) whose options they are. CONTRIBUTING.md §Simulations has a small engine to
copy; tools/sims/test_contract.py holds every folder to this.
"""
import argparse
import inspect


def action(method):
    """Mark a method (or a staticmethod) the page may call."""
    target = method.__func__ if isinstance(method, staticmethod) else method
    target.page_may_call = True
    return method


def check(name, value, rule):
    """value, if it keeps rule, a kind and its range; else a ValueError in a
    sentence the page can show."""
    kind, *allowed = rule
    if kind is bool:
        ok = isinstance(value, bool)
    elif kind is str:
        ok = value in allowed
    else:
        numbers = int if kind is int else (int, float)
        ok = (isinstance(value, numbers) and not isinstance(value, bool)
              and allowed[0] <= value <= allowed[1])
    if not ok:
        raise ValueError(f"{name} must be {wanted(kind, allowed)}, not {value!r}")
    return value


def wanted(kind, allowed):
    if kind is bool:
        return "true or false"
    if kind is str:
        return " or ".join(allowed)
    whole = "whole " if kind is int else ""
    return f"a {whole}number from {allowed[0]} to {allowed[1]}"


def checked(kinds, settings):
    """settings, if every one is of its kind (kinds[name]) and in its range."""
    for name, value in settings.items():
        check(name, value, kinds[name])
    return settings


def changed(kinds, settings, changes):
    """settings with changes made, all checked; a name not in kinds is refused."""
    unknown = sorted(set(changes) - set(kinds))
    if unknown:
        raise ValueError(f"unknown setting {unknown[0]!r}; known: {', '.join(kinds)}")
    return checked(kinds, {**settings, **changes})


class Engine:
    """The base of every engine: see this module's docstring."""
    TASKS = {}
    SETTINGS = {}
    PAGE_STARTS_WITH = {}

    def __init__(self):
        self.earned = set()

    def tasks(self):
        return [{"id": key, "text": text, "done": key in self.earned}
                for key, text in self.TASKS.items()]

    def state(self):
        raise NotImplementedError(f"{type(self).__name__} must say what the page draws")

    def close(self):
        """Nothing to free, unless an engine keeps connections or files."""

    @classmethod
    def page_calls(cls):
        """(methods, functions): the names of the methods the page may call
        on an instance, state included, and the functions it may call with
        none, by name."""
        methods, functions = {"state"}, {}
        for name, member in inspect.getmembers(cls):
            if getattr(member, "page_may_call", False):
                if isinstance(inspect.getattr_static(cls, name), staticmethod):
                    functions[name] = member
                else:
                    methods.add(name)
        return methods, functions


def engine_of(module):
    """The Engine class that an engine module defines: exactly one."""
    found = [value for value in vars(module).values()
             if inspect.isclass(value) and issubclass(value, Engine)
             and value.__module__ == module.__name__]
    if len(found) != 1:
        raise LookupError(f"{module.__file__} must define one class on "
                          f"tools.sims.engine.Engine; it defines {len(found)}")
    return found[0]


class Rerun(Engine):
    """An engine whose whole run follows from its settings (SETTINGS): it
    runs at once (_run), and again at every change. A task is earned
    (_earn) only by a change: by what the reader did, never by where the
    page started. What the reader has earned stays from run to run."""

    def __init__(self, **values):
        super().__init__()
        self.settings = checked(self.SETTINGS, values)
        self._run()

    @action
    def configure(self, **changes):
        """Change any settings (the constructor's keywords), and run again."""
        self.settings = changed(self.SETTINGS, self.settings, changes)
        self._run()
        self._earn()

    def _run(self):
        raise NotImplementedError

    def _earn(self):
        """Nothing to earn, unless the engine says what."""


def program(engine, description, show, **helps):
    """A text program's main(argv): an option for each of engine's
    SETTINGS (--name VALUE; --name and --no-name for a bool), with the
    constructor's defaults and helps[name] as its help; it makes the
    engine, refusing a bad setting as argparse refuses a bad option, and
    calls show(engine)."""
    defaults = {name: parameter.default for name, parameter
                in inspect.signature(engine.__init__).parameters.items()}
    if set(engine.SETTINGS) - set(defaults):
        raise TypeError(f"{engine.__name__}() takes no keyword for the settings "
                        f"{sorted(set(engine.SETTINGS) - set(defaults))}")

    def main(argv=None):
        parser = argparse.ArgumentParser(description=description)
        for name, (kind, *allowed) in engine.SETTINGS.items():
            option = {"default": defaults[name], "help": helps.get(name)}
            if kind is bool:
                option["action"] = argparse.BooleanOptionalAction
            elif kind is str:
                option["choices"] = allowed
            else:
                option["type"] = kind
            parser.add_argument(f"--{name.replace('_', '-')}", **option)
        try:
            sim = engine(**vars(parser.parse_args(argv)))
        except ValueError as error:
            parser.error(str(error))
        try:
            show(sim)
        finally:
            sim.close()
    return main
