"""The O7 story (Chapter 10), one line at a time: the story that
`python3 ex09_charge_worker.py o7` prints, told by the same code. The
replay_o7() of Exercise 9's given file, ex09_practice_given.py, yields each
line of its timeline before doing what the line says, by ex09's own
functions; the command line prints the lines, and this engine shows them
one per step, each with what the provider printed while it was done.

So a step runs ex09 up to the next line: the line shown is done at once,
and the next one waits, unseen, for the next step. The state (the
provider's charges, the operations, the dead letters) is ex09's own.

The page draws the story as a sequence diagram, and the state says all it
draws. Each step has its time in seconds (the given file's clock as the
line was told), what it is (a delivery, a crash, an acknowledgement, a
message parked, or a note), the lane of the worker it names, and an arrow
for each request the provider answered while it ran, in words: the
engine notes every create, confirm and charge as the provider answers it
(what it answered, whether it kept a new key, whether money moved). The
provider's key windows come from the answers it kept under a key, each
for the given file's KEY_WINDOW_SECONDS.

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
import re

from tools import course
from ..engine import Engine, action, check, program

# What each of replay_o7()'s lines says happened, read from its words: the
# kind of step, and the words the diagram's arrow or mark needs. A line
# that matches none is drawn as a note across the diagram.
READINGS = [
    ("take", r"(?P<worker>W\d+) takes (?P<operation>\S+) \(invoice \d+, (?P<amount>\S+)\)",
     "{operation}, {amount}"),
    ("crash", r"(?P<worker>W\d+) crashes", "crashes"),
    ("deliver", r"the queue delivers (?P<operation>\S+) again.*; (?P<worker>W\d+) takes it",
     "{operation} again"),
    ("deliver", r"a message for (?P<operation>\S+) arrives.* for (?P<amount>\S+)$",
     "{operation}, {amount}"),
    ("deliver", r"(?P<operation>\S+) is delivered again, (?P<late>[^:]+? later)",
     "{operation}, {late}"),
    ("ack", r"(?P<worker>W\d+) records (?P<charge>\S+) and acknowledges (?P<operation>\S+)",
     "records {charge}, acks"),
    ("park", r"(?P<worker>W\d+) refuses it \((?P<why>\w+)\) and parks it",
     "{why}: parks it"),
    ("note", r"(?P<all>the provider .+)", "{all}"),
]
WORKER = re.compile(r"\bW\d+\b")
NTH = {2: "second", 3: "third"}


def read(text, next_text=""):
    """What a line of the story says: its kind, the worker it names (or,
    for a message that arrives for no worker named yet, the worker the
    next line names) and its few words for the diagram."""
    for kind, pattern, words in READINGS:
        found = re.match(pattern, text)
        if found:
            named = found.groupdict().get("worker") or next(
                iter(WORKER.findall(next_text)), None)
            return kind, named, words.format(**found.groupdict())
    return "note", None, text


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
        for name in ("create", "confirm", "charge"):        # the requests with a key
            setattr(self.provider, name, self._noted(getattr(self.provider, name)))
        self.calls, self.kept = [], []
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
        time, text, seconds = self.coming
        charged = self._charged()
        self.calls = []
        provider, self.coming = self._run()
        kind, worker, words = read(text, self.coming[1] if self.coming else "")
        day, _, hour = time.rpartition(" ")
        self.steps.append({"n": len(self.steps) + 1, "time": time, "text": text,
                           "provider": provider, "seconds": seconds, "day": day,
                           "hour": hour, "kind": kind, "worker": worker,
                           "arrows": self._arrows(kind, worker, words)})
        self._earn(self._charged().keys() - charged.keys())
        return None

    def _run(self):
        """ex09's story, up to its next line: what the provider printed on
        the way, and the line with its time in seconds (None at the story's
        end)."""
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            line = next(self.story, None)
        if line is not None:
            line = (*line, self.clock())
        return [text.strip() for text in printed.getvalue().splitlines()], line

    def _arrows(self, kind, worker, words):
        """The step as the diagram draws it: an arrow between two lanes, or a
        mark on one (a crash) or across all (a note), each with its words;
        then an arrow for each request the worker made of the provider."""
        if kind in ("take", "deliver"):
            first = {"from": "queue", "to": worker, "kind": "deliver"}
        elif kind in ("ack", "park"):
            first = {"from": worker, "to": "queue", "kind": kind}
        else:
            first = {"from": worker, "to": worker, "kind": kind}
        return [dict(first, label=words, warning="")] + [{"from": worker, "to": "provider", "kind": call["kind"],
                           "label": call["label"], "warning": call["warning"]}
                          for call in self.calls]

    def _noted(self, request):
        """The provider's request, noted for the step that makes it: what it
        answered, in a few words; whether it kept the answer under a key
        (a key window begins), and whether money moved, for the first time
        for its operation or again."""
        provider = self.provider

        def noted(*args, **kwargs):
            keys, paid = dict(provider.keys), len(provider.payments)
            call = {"method": request.__name__, "kind": "call", "warning": ""}
            try:
                answer = request(*args, **kwargs)
            except Exception as error:
                call["label"] = f"{call['method']}: {type(error).__name__}"
                self.calls.append(call)
                raise
            for key, entry in provider.keys.items():
                if keys.get(key) is not entry:  # a new answer kept under this key
                    self.kept.append({"operation": provider.charges[entry[1]]["key"],
                                      "from": entry[2], "step": len(self.steps) + 1,
                                      "arrow": len(self.calls) + 1})
            charge = provider.charges[answer]
            if len(provider.payments) > paid:
                _, cents, charged = provider.payments[-1]
                before = [provider.charges[other]["key"] for other in provider.paid()[:paid]]
                nth = before.count(charge["key"]) + 1
                call["label"] = (f"{call['method']} \N{RIGHTWARDS ARROW} {charged} paid, "
                                 f"{self.ex09.dollars(cents)}")
                call["kind"] = "charge" if nth == 1 else "twice"
                if nth > 1:
                    call["warning"] = f"a {NTH.get(nth, f'{nth}th')} charge for {charge['key']}"
            elif provider.keys == keys:
                call["label"] = f"{call['method']}: key known, {answer} again"
            elif charge["state"] == "paid":
                call["label"] = f"{call['method']} {answer}: paid already"
            else:
                call["label"] = f"{call['method']} \N{RIGHTWARDS ARROW} {answer}"
            self.calls.append(call)
            return answer
        return noted

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

    def _lanes(self):
        """The diagram's lanes: the queue, each worker in the order it first
        acts, and the provider."""
        workers = dict.fromkeys(step["worker"] for step in self.steps if step["worker"])
        return ([{"id": "queue", "name": "queue"}]
                + [{"id": worker, "name": worker} for worker in workers]
                + [{"id": "provider", "name": "provider"}])

    def _key_windows(self):
        """When the provider knew each operation's keys: from each answer it
        kept under one, for KEY_WINDOW_SECONDS, windows that overlap taken
        as one. `forgotten`: it ended by the time of the last step shown."""
        window = self.practice.KEY_WINDOW_SECONDS
        now = self.steps[-1]["seconds"] if self.steps else 0
        merged = []
        for kept in sorted(self.kept, key=lambda kept: kept["from"]):
            same = [each for each in merged if each["operation"] == kept["operation"]
                    and kept["from"] <= each["until"]]
            if same:
                same[-1]["until"] = max(same[-1]["until"], kept["from"] + window)
            else:
                merged.append(dict(kept, until=kept["from"] + window))
        stamp = self.practice.Clock()
        for each in merged:
            stamp.now = each["until"]
            day, _, hour = stamp.stamp().rpartition(" ")
            each.update(forgotten=each["until"] <= now, until_time=stamp.stamp(),
                        until_day=day, until_hour=hour,
                        label=f"the provider forgets {each['operation']}'s keys")
        return merged

    def state(self):
        operations = self.db.execute(
            "SELECT id, input_digest, state, charge_id FROM operations ORDER BY id").fetchall()
        return {
            "one_request": self.one_request,
            "key_window_hours": self.practice.KEY_WINDOW_SECONDS / 3600,
            "time": self.steps[-1]["time"] if self.steps else "",
            "steps": [dict(step, provider=list(step["provider"]),
                           arrows=[dict(arrow) for arrow in step["arrows"]])
                      for step in self.steps],
            "lanes": self._lanes(),
            "key_windows": self._key_windows(),
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
