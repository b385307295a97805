"""The simulations' JSON API: the one function the page's JavaScript calls
(through Pyodide) to create, drive and read the simulations.

    call('{"sim": "race", "instance": "race-1", "method": "new", "args": {"claim": "naive"}}')
    call('{"sim": "race", "instance": "race-1", "method": "step", "args": [0]}')

A request names the simulation (a folder's name, as sims.folders() gives
it: "race", "killable-queue", ...), an instance id
chosen by the page (several can live at once), a method and its arguments:
a list (positional) or an object (keywords). "new" makes the instance (its
args go to the constructor) and "close" frees it. The answer is always JSON:
{"ok": true, "state": <the instance's state() or null>, "result": <what the
method returned>}, or {"ok": false, "error": "<message>"}; nothing raises.

What can be called comes from each engine's class (engine.py): "new"
makes it, "close" closes it, and its methods marked @action and state()
are called on the instance; an action that is a staticmethod needs no
instance. Nothing else can.

Try it in a terminal, from the course's folder:
    python3 -m tools.sims.api '{"sim": "race", "instance": "a", "method": "new"}'
"""
import importlib
import json
import sys
from pathlib import Path

from . import folders
from .engine import engine_of


def engines(package=__package__):
    """{name: its Engine class} for every simulation folder of package."""
    root = Path(importlib.import_module(package).__file__).parent
    return {name: engine_of(importlib.import_module(f"{package}.{folder.name}.engine"))
            for name, folder in folders(root).items()}


class Api:
    """The simulations' JSON API over some engines, and their live instances."""

    def __init__(self, engines):
        self.engines = engines
        self.instances = {}     # (sim, instance id) -> the live object

    def call(self, request_json):
        """One request in, one JSON answer out; errors are answers too."""
        try:
            return json.dumps({"ok": True, **self.handle(json.loads(request_json))})
        except Exception as error:   # a bad request must not break the page
            return json.dumps({"ok": False, "error": describe(error)})

    def handle(self, request):
        if not isinstance(request, dict):
            raise ValueError("the request must be a JSON object")
        sim_name, instance_id, method = (request.get(key)
                                         for key in ("sim", "instance", "method"))
        if sim_name not in self.engines:
            raise ValueError(f"unknown sim {sim_name!r}; known: {', '.join(sorted(self.engines))}")
        if not isinstance(instance_id, str) or not instance_id:
            raise ValueError("instance must be a non-empty string")
        engine = self.engines[sim_name]
        methods, functions = engine.page_calls()
        positional, keywords = split_args(request.get("args"))
        key = (sim_name, instance_id)

        if method == "new":
            made = engine(*positional, **keywords)    # made first: a bad one replaces nothing
            self.close(key)
            self.instances[key] = made
            return {"state": made.state(), "result": None}
        if method == "close":
            return {"state": None, "result": self.close(key)}
        if method in functions:
            result = functions[method](*positional, **keywords)
            live = self.instances.get(key)
            return {"state": live.state() if live else None, "result": result}
        if method not in methods:
            allowed = sorted(methods | set(functions) | {"new", "close"})
            raise ValueError(f"unknown method {method!r} for {sim_name}; "
                             f"allowed: {', '.join(allowed)}")
        if key not in self.instances:
            raise LookupError(f"no {sim_name} instance {instance_id!r}: call \"new\" first")
        instance = self.instances[key]
        result = getattr(instance, method)(*positional, **keywords)
        if method == "state":
            result = None                                 # it is in "state" already
        return {"state": instance.state(), "result": result}

    def close(self, key):
        """Free an instance (its connections and files); True if there was one."""
        instance = self.instances.pop(key, None)
        if instance is not None:
            instance.close()
        return instance is not None


def describe(error):
    if isinstance(error, json.JSONDecodeError):
        return f"the request is not JSON: {error}"
    if isinstance(error, (ValueError, TypeError, LookupError)):
        return str(error)
    return f"{type(error).__name__}: {error}"


def split_args(args):
    """A list is positional arguments, an object keyword arguments; a list
    may end with an object of keywords."""
    if args is None:
        return [], {}
    if isinstance(args, dict):
        return [], args
    if not isinstance(args, list):
        raise ValueError("args must be a list or an object")
    if args and isinstance(args[-1], dict):
        return args[:-1], args[-1]
    return args, {}


# The page's API: every simulation folder of tools/sims/.
PAGE = Api(engines())
SIMS, instances, call, close = PAGE.engines, PAGE.instances, PAGE.call, PAGE.close


if __name__ == "__main__":
    for request in sys.argv[1:]:
        print(call(request))
    for key in list(instances):
        close(key)
