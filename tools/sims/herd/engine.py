"""Thundering herd (Chapter 6): clients contend for one resource, and back
off when it turns them away, with or without jitter.

The model is Chapter 6's herd.py (code/herd.py), which the reader may copy,
after Marc Brooker's "Exponential Backoff And Jitter" (AWS Architecture
Blog, 2015) and his simulator: `clients` clients (100 unless set) each
change one shared record once, all from the same moment. The record takes
a write only from a client that read it since the last write taken
(optimistic concurrency control): a client reads, and its write arrives a
round trip (ROUND_TRIP_SECONDS, 10 ms each way) later; if another write was
taken meanwhile, it is turned away. The client hears so half a round trip
later, waits as its policy says (herd.py's wait()), reads again and writes
again, until its write is taken. Every client's first write arrives at
0 s. The round trip, the base (5 ms) and the cap (2 s) are Brooker's; his
ceiling starts at twice the base, this one at the base, as everywhere in
the course. His network's delays vary (each way, 10 ms on average, with
a standard deviation of 2 ms), which breaks up part of a herd without
jitter; here they do not, so the clients without jitter stay in step. This engine runs herd.py's
contend() and adds what the page draws and the reader's tasks.

The policies, for a client's n-th failure (n = 1, 2, ...), with
ceiling = min(cap, base * 2 ** (n - 1)):
  none          0: call again at once
  exponential   the ceiling itself (no jitter)
  full          a random time from 0 to the ceiling (full jitter)
  equal         half the ceiling, plus a random time up to the other half
  decorrelated  a random time from base to three times the client's last
                wait, at most cap (its first "last wait" is base)

Three numbers describe a policy's run: calls (all the writes sent, taken
or turned away: the work the clients and the resource did), time (when the
last write was taken), and in step (the most writes sent at one instant
after the first: clients that failed together and still call together).

Writes that arrive at the same moment are answered in the clients' order,
so a herd that writes at one instant gets one write through and the rest
turned away. Time is virtual: nothing sleeps, and a seed always gives the same
run, so it runs in the browser (Pyodide) as in a terminal.

Run it in a terminal:
    python3 -m tools.sims herd [--clients N] [--base S] [--cap S] [--seed N] [--policy P]
Or from Python:
    sim = Herd(policy="full"); sim.state()["calls"]
"""
import collections

from tools import course
from ..engine import Rerun, program

reader = course.module("herd.py")     # the model, as the reader has it
ROUND_TRIP_SECONDS = reader.ROUND_TRIP_SECONDS
POLICIES = tuple(reader.POLICIES)
NAMES = dict(reader.POLICIES)
wait, contend, summary, seconds = reader.wait, reader.contend, reader.summary, reader.shown
BINS = 50                        # the timeline's columns
SLICES = 200                     # the picture's columns: slices of the run
CROWDS = 8                       # how many of the first crowds the state names
# The picture draws the chosen policy's run beside another: a jittered one
# beside the herd it breaks up (exponential, no jitter), one without jitter
# beside full jitter.
BESIDE = {"none": "full", "exponential": "full", "full": "exponential",
          "equal": "exponential", "decorrelated": "exponential"}


def timeline(calls, seconds, bins=BINS):
    """The calls in each of `bins` equal slices of the run: taken and turned away."""
    width = seconds / bins
    columns = [{"start": width * n, "taken": 0, "turned_away": 0} for n in range(bins)]
    for time, _, taken in calls:
        column = columns[min(bins - 1, int(time / width))]
        column["taken" if taken else "turned_away"] += 1
    return columns


def raster(calls, clients, seconds, slices=SLICES):
    """The run in `slices` equal slices, a row for each client: the slices
    it called in (each once) and the one its write was taken in. Clients in
    step call in the same slices, round after round, and fill columns;
    jittered ones are spread across the run, a smear."""
    width = seconds / slices
    rows = [{"called": set(), "taken": None} for _ in range(clients)]
    for time, client, taken in calls:
        column = min(slices - 1, int(time / width))
        rows[client]["called"].add(column)
        if taken:
            rows[client]["taken"] = column
    return [{"called": sorted(row["called"]), "taken": row["taken"]} for row in rows]


def crowds(calls, first=CROWDS):
    """The first instants at which two or more clients called together."""
    at_once = collections.Counter(time for time, _, _ in calls)
    return [{"time": time, "calls": count}
            for time, count in sorted(at_once.items()) if count >= 2][:first]


class Herd(Rerun):
    TASKS = {
        "herd": "make the herd visible: clients that call at the same instant, round after round",
        "cap": "shrink the cap until full jitter makes more than half the calls that "
               "exponential backoff without jitter makes",
        "quick": "get 100 clients through in under 3 s with fewer than 1,200 calls",
    }
    SETTINGS = {
        "policy": (str, *POLICIES),
        "clients": (int, 1, 500),
        "base": (float, 0.0001, 1.0),
        "cap": (float, 0.0001, 60.0),
        "seed": (int, 0, 2**63),
    }
    # The page opens on full jitter: the herd is for the reader to find.
    PAGE_STARTS_WITH = {"policy": "full"}

    def __init__(self, policy="exponential", clients=100, base=0.005, cap=2.0, seed=1):
        super().__init__(policy=policy, clients=clients, base=base, cap=cap, seed=seed)

    def _run(self):
        s = self.settings
        self.runs = {policy: contend(policy, s["clients"], s["base"], s["cap"], s["seed"])
                     for policy in POLICIES}
        self.policies = {policy: summary(calls) for policy, calls in self.runs.items()}

    def _earn(self):
        s, ran = self.settings, self.policies[self.settings["policy"]]
        if s["clients"] >= 4 and ran["in_step"] >= s["clients"] // 2:
            self.earned.add("herd")
        if (s["policy"] == "full" and s["clients"] >= 10
                and ran["calls"] > self.policies["exponential"]["calls"] / 2):
            self.earned.add("cap")
        if s["clients"] >= 100 and ran["seconds"] < 3 and ran["calls"] < 1200:
            self.earned.add("quick")

    def state(self):
        s = self.settings
        ran = self.policies[s["policy"]]
        drawn = (s["policy"], BESIDE[s["policy"]])
        calls = self.runs[s["policy"]]
        return {"settings": dict(s), **ran, "timeline": timeline(calls, ran["seconds"]),
                "rasters": [{"policy": policy, **self.policies[policy], "slices": SLICES,
                             "rows": raster(self.runs[policy], s["clients"],
                                            self.policies[policy]["seconds"])}
                            for policy in drawn],
                "crowds": crowds(calls),
                "policies": {policy: dict(each) for policy, each in self.policies.items()},
                "names": dict(NAMES), "tasks": self.tasks()}


# ---- the text program

def bar(count, most, width=40):
    return "█" * round(width * count / most) if most else ""


def print_run(sim):
    s = sim.settings
    print(f"{s['clients']} clients, one write each, to a record that takes a write only from "
          f"a client that read it since the last; waits from {s['base'] * 1000:g} ms up to "
          f"{s['cap']:g} s; seed {s['seed']}")
    print()
    reader.print_table(sim.policies)
    state = sim.state()
    most = max(column["taken"] + column["turned_away"] for column in state["timeline"])
    print()
    print(f"{NAMES[s['policy']]}: calls over time, {BINS} slices of "
          f"{seconds(state['seconds'] / BINS)} (the longest bar: {most} calls)")
    for column in state["timeline"]:
        count = column["taken"] + column["turned_away"]
        print(f" {seconds(column['start']):>10} {count:5} {bar(count, most)}")


main = program(Herd, "Clients that back off, with and without jitter.", print_run,
               base="the first wait, in seconds", cap="the longest wait, in seconds",
               seed="repeat the same dice", policy="whose calls to draw over time")


if __name__ == "__main__":
    main()
