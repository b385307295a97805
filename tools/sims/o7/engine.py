"""The O7 story (Chapter 10), one line at a time: the story that
`python3 ex09_charge_worker.py o7` prints, told by the same code. The
replay_o7() of Exercise 9's given file, ex09_practice_given.py, yields each
line of its timeline before doing what the line says, by ex09's own
functions; the command line prints the lines, and this engine shows them
one per step, each with what the provider printed while it was done.

So a step runs ex09 up to the next line: the line shown is done at once,
and the next one waits, unseen, for the next step. The state (the
provider's charges, the operations, the dead letters) is ex09's own.

O7Story(blind=True) trusts the provider's keys for 48 hours instead of
ex09's 23, the chapter's Break It: each story runs a copy of ex09 of its
own (course.fresh), whose KEY_TRUSTED_SECONDS it sets as a reader edits it,
and a copy of the given file that drives that copy.

Time is virtual (the given file's Clock): nothing sleeps and nothing reads
the wall clock, so it runs the same in the browser (Pyodide).

Run it in a terminal, from the course's folder:
    python3 -m tools.sims o7 [--blind]
Or drive it from Python:
    story = O7Story(); story.next(); story.state()
"""
import contextlib
import io

from tools import course
from ..engine import Engine, action, check, program

BLIND_TRUST_SECONDS = 48 * 3600          # the chapter's Break It


class O7Story(Engine):
    """Operation O7 (North, invoice 7, $50.00) and a later O8: a crash after
    the provider's commit, a redelivery with the same key, a changed amount
    refused, and O8 back 26 hours later, past the provider's key window,
    reconciled (or, blind, charged again)."""
    TASKS = {
        "reconcile": "see a redelivery after the key window reconciled, not charged again",
        "blind": "trust the key past its window and see a second charge",
    }
    SETTINGS = {"blind": (bool,)}

    def __init__(self, blind=False):
        super().__init__()
        self.db = self.story = None
        self.reset(blind)

    @action
    def reset(self, blind=None):
        """Back to before 12:00; blind, if given, says whether the worker
        trusts keys past the provider's window. What was earned stays."""
        if blind is not None:
            self.blind = check("blind", blind, self.SETTINGS["blind"])
        self.close()
        self.ex09 = course.fresh("ex09_charge_worker.py")
        if self.blind:
            self.ex09.KEY_TRUSTED_SECONDS = BLIND_TRUST_SECONDS
        practice = course.fresh("ex09_practice_given.py", ex09_charge_worker=self.ex09)
        self.clock = practice.Clock()
        self.db = self.ex09.open_db(":memory:")
        self.provider = practice.Provider(self.clock, first_charge=9)
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
        provider's key window: charged once (reconciled) or twice (blind)."""
        charges = list(self.provider.charges.values())
        started = self._charged()
        for op_id in just_charged:
            if self.clock() - started[op_id] > self.ex09.KEY_WINDOW_SECONDS:
                self.earned.add("reconcile" if charges.count(op_id) == 1 else "blind")

    def state(self):
        operations = self.db.execute(
            "SELECT id, input_digest, state, charge_id FROM operations ORDER BY id").fetchall()
        return {
            "blind": self.blind,
            "key_window_hours": self.ex09.KEY_WINDOW_SECONDS / 3600,
            "key_trusted_hours": self.ex09.KEY_TRUSTED_SECONDS / 3600,
            "time": self.steps[-1]["time"] if self.steps else "",
            "steps": [dict(step, provider=list(step["provider"])) for step in self.steps],
            "finished": self.finished(),
            "provider": {"calls": self.provider.calls,
                         "charges": [{"id": charge, "reference": reference}
                                     for charge, reference in self.provider.charges.items()]},
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
               blind="trust the provider's keys for 48 h")


if __name__ == "__main__":
    main()
