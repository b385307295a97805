"""What the page may set on an engine, checked before a run: each engine
lists its settings with their kinds and ranges, and this refuses anything
else with a sentence the page can show.

    SETTINGS = {"seed": (int, 0, 2**63), "jitter": (bool,), "keys": (str, "none", "stable")}
    settings = checked(SETTINGS, {"seed": 1, "jitter": True, "keys": "none"})
    settings = changed(SETTINGS, settings, {"seed": 2})
"""


def checked(kinds, settings):
    """settings, if every one is of its kind and in its range: (bool,),
    (str, choice, ...), or (int or float, lowest, highest)."""
    for name, value in settings.items():
        kind, *allowed = kinds[name]
        if kind is bool:
            ok = isinstance(value, bool)
        elif kind is str:
            ok = value in allowed
        else:
            numbers = int if kind is int else (int, float)
            ok = (isinstance(value, numbers) and not isinstance(value, bool)
                  and allowed[0] <= value <= allowed[1])
        if not ok:
            wanted = ("true or false" if kind is bool else " or ".join(allowed) if kind is str
                      else f"a {'whole ' if kind is int else ''}number from {allowed[0]} "
                           f"to {allowed[1]}")
            raise ValueError(f"{name} must be {wanted}, not {value!r}")
    return settings


def changed(kinds, settings, changes):
    """settings with changes made, all checked; a name not in kinds is refused."""
    unknown = sorted(set(changes) - set(kinds))
    if unknown:
        raise ValueError(f"unknown setting {unknown[0]!r}; known: {', '.join(kinds)}")
    return checked(kinds, {**settings, **changes})


class Rerun:
    """An engine whose whole run follows from its settings (the class's
    SETTINGS): it runs at once (_run), and again at every change. A task is
    earned (_earn) only by a change: by what the reader did, never by where
    the page started. What the reader has earned stays from run to run."""
    SETTINGS = {}

    def __init__(self, **values):
        self.settings = checked(self.SETTINGS, values)
        self.earned = set()
        self._run()

    def configure(self, **changes):
        """Change any settings (the constructor's keywords), and run again."""
        self.settings = changed(self.SETTINGS, self.settings, changes)
        self._run()
        self._earn()

    def close(self):
        """Nothing to free: it keeps no connection and no file."""
