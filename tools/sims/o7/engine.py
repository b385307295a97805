"""The O7 story (Chapter 10), one line at a time: the story that
`python3 ex09_charge_worker.py o7` prints, told by the same code. The
replay_o7() of Exercise 9's given file, ex09_practice_given.py, yields each
line of its timeline before doing what the line says, by ex09's own
functions; the command line prints the lines, and this engine shows them
one per step, each with what the provider printed while it was done.

So a step runs ex09 up to the next line: the line shown is done at once,
and the next one waits, unseen, for the next step. The state (the
provider's charges, the operations, the dead letters) is ex09's own.

O7Story(one_request=True) is the chapter's Break It: the worker's create
becomes a request that creates the charge and pays it at once, so nothing
is stored before the money moves. The story's provider answers create as
charge, which is what the reader's edit (`self.provider.create(` to
`self.provider.charge(`) makes the worker ask for. Each story runs a copy
of ex09 of its own (course.fresh), and a copy of the given file that
drives that copy.

Time is virtual (the given file's Clock): nothing sleeps and nothing reads
the wall clock, so it runs the same in the browser (Pyodide).

Run it in a terminal, from the course's folder:
    python3 -m tools.sims o7 [--one-request]
Or drive it from Python:
    story = O7Story(); story.next(); story.state()
"""
import contextlib
import io

from tools import course
from ..engine import Engine, action, check, program

class O7Story(Engine):
    """Operation O7 (North, invoice 7, $50.00) and a later O8: a crash after
    the provider's commit, a redelivery that confirms the stored charge, a
    changed amount refused, and O8 back 26 hours later, past the provider's
    key window, settled by its stored charge (or, paid in one request,
    charged again)."""
    TASKS = {
        "stored": "see a redelivery past the key window settled by the stored charge",
        "twice": "pay in one request, and see the late redelivery charge a second time",
    }
    SETTINGS = {"one_request": (bool,)}

    def __init__(self, one_request=False):
        super().__init__()
        self.db = self.story = None
        self.reset(one_request)

    @action
    def reset(self, one_request=None):
        """Back to before 12:00; one_request, if given, says whether the
        worker pays in one request. What was earned stays."""
        if one_request is not None:
            self.one_request = check("one_request", one_request,
                                     self.SETTINGS["one_request"])
        self.close()
        self.ex09 = course.fresh("ex09_charge_worker.py")
        practice = course.fresh("ex09_practice_given.py", ex09_charge_worker=self.ex09)
        self.practice, self.clock = practice, practice.Clock()
        self.db = self.ex09.open_db(":memory:")
        self.provider = practice.Provider(self.clock, first_charge=9)
        if self.one_request:
            self.provider.create = self.provider.charge     # as the Break It asks for
        self.dead_letters = []
        self.story = practice.replay_o7(self.clock, self.db, self.provider, self.dead_letters)
        self.steps = []
        _, self.coming = self._run()            # the first line, not shown yet

    def close(self):
        if self.story is not None:
            self.story.close()
        if self.db is not None:
            self.db.close()

    def finished(self):
        return self.coming is None

    @action
    def next(self):
        """Show the next line, and do what it says. Says why not, once the
        story is over."""
        if self.finished():
            return "the story is over: reset to see it again"
        time, text = self.coming
        charged = self._charged()
        provider, self.coming = self._run()
        self.steps.append({"n": len(self.steps) + 1, "time": time, "text": text,
                           "provider": provider})
        self._earn(self._charged().keys() - charged.keys())
        return None

    def _run(self):
        """ex09's story, up to its next line: what the provider printed on
        the way, and the line (None at the story's end)."""
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            line = next(self.story, None)
        return [text.strip() for text in printed.getvalue().splitlines()], line

    def _charged(self):
        """The operations our records say are charged, and when each started."""
        return dict(self.db.execute(
            "SELECT id, started_at FROM operations WHERE state = 'charged'"))

    def _earn(self, just_charged):
        """Earn a task when this step recorded an operation past the
        provider's key window: paid once (by its stored charge) or twice."""
        started = self._charged()
        for op_id in just_charged:
            if self.clock() - started[op_id] > self.practice.KEY_WINDOW_SECONDS:
                paid = [self.provider.charges[charge]["key"] for charge in self.provider.paid()]
                self.earned.add("stored" if paid.count(op_id) == 1 else "twice")

    def state(self):
        operations = self.db.execute(
            "SELECT id, input_digest, state, charge_id FROM operations ORDER BY id").fetchall()
        return {
            "one_request": self.one_request,
            "key_window_hours": self.practice.KEY_WINDOW_SECONDS / 3600,
            "time": self.steps[-1]["time"] if self.steps else "",
            "steps": [dict(step, provider=list(step["provider"])) for step in self.steps],
            "finished": self.finished(),
            "provider": {"calls": self.provider.calls,
                         "charges": [dict(charge, id=charge_id) for charge_id, charge
                                     in self.provider.charges.items()]},
            "operations": [{"id": op_id, "digest": digest[:12], "state": state,
                            "charge_id": charge_id}
                           for op_id, digest, state, charge_id in operations],
            "dead_letters": [{"id": message["id"], "inputs": dict(message["inputs"])}
                             for message in self.dead_letters],
            "tasks": self.tasks(),
        }


# ---- the text program: the lines as ex09 prints them

def print_o7(story):
    while story.next() is None:
        step = story.steps[-1]
        print(f"{step['time']:13}{step['text']}")
        for line in step["provider"]:
            print(f"{'':13}{line}")


main = program(O7Story, "Chapter 10's O7, step by step.", print_o7,
               one_request="pay in one request, as the Break It does")


if __name__ == "__main__":
    main()
