"""Killable queue (Chapters 4-5): a producer, the jobs table and three workers,
on the capstone's own library (code/capstone/tinyq.py) and a real SQLite file.

The reader enqueues jobs, kills any worker at any moment (even after it has
sent an email and before it has acknowledged it), restarts it and sets the
lease; leases count down, run out, and another worker takes the job over;
the outbox lists every email, duplicates marked. The state keeps a short
history for the page's picture: each claim of the last minute, with its
send, its lease and how it ended, and when workers died and were restarted.

Time is virtual: nothing sleeps and nothing reads the wall clock, and
nothing is left to chance (tinyq's fencing tokens count claims; nothing is random),
so the same actions always give the same run, and it runs in the browser
(Pyodide has no threads and its time.sleep does not wait).

Run the scripted story in a terminal:
    python3 -m tools.sims killable-queue
Or drive it from Python:
    sim = KillableQueue()
    sim.enqueue(3); sim.tick(2.2); sim.kill(0); sim.tick(4); sim.state()
"""
import argparse
import collections
import shutil
import tempfile
from pathlib import Path

from tools import course
from ..engine import Engine, action, check

tinyq = course.module("capstone/tinyq.py")

SEND_SECONDS = 2.0      # talking to the mail server
ACK_SECONDS = 0.5       # sent, not yet acknowledged: long enough to kill it there
POLL_SECONDS = 0.5      # an idle worker asks for a job this often
EVENTS_KEPT = 50
HISTORY_SECONDS = 60    # how far back the picture can look
NAMES = ("ann", "bob", "cat", "dan", "eve", "fay", "gus", "hal", "ivy", "jon", "kim", "liz")


def to_ms(seconds):
    """The clock counts whole milliseconds, so 0.1 s steps never drift."""
    return round(seconds * 1000)


def say_seconds(ms):
    """2.0 s, 12.5 s; 2.25 s when the reader ticked finer than a tenth."""
    return f"{ms / 1000:.1f} s" if ms % 100 == 0 else f"{ms / 1000:.3f}".rstrip("0") + " s"


def address_for(number):
    """Made-up addresses: ann@example.com, bob@..., then ann2@... (number from 0)."""
    name = NAMES[number % len(NAMES)]
    lap = number // len(NAMES)
    return f"{name}{lap + 1 if lap else ''}@example.com"


class Worker:
    """One worker process: its own connection (a tinyq.Queue, None while it
    is dead), what it is doing, and when it will next do something."""

    def __init__(self, index, queue, due):
        self.index = index
        self.name = f"worker {index + 1}"
        self.queue = queue
        self.phase = "idle"             # idle, sending, sent, dead
        self.job = None                 # the tinyq.Job it holds
        self.claim = None               # and that claim's entry in the history
        self.due = due                  # ms; when its phase ends or it polls again

    @property
    def alive(self):
        return self.queue is not None


class KillableQueue(Engine):
    TASKS = {
        "die-holding": "kill a worker while it holds a job",
        "takeover": "see a lease expire and another worker take the job over",
        "duplicate": "get a duplicate email",
    }
    SETTINGS = {"workers": (int, 1, 6), "lease": (float, 0.1, 600), "jobs": (int, 0, 20)}
    # The page starts with jobs waiting, so that Play has something to show.
    PAGE_STARTS_WITH = {"jobs": 3}

    def __init__(self, workers=3, lease=5.0, jobs=0):
        super().__init__()
        check("workers", workers, self.SETTINGS["workers"])
        self.lease = self._checked_lease(lease)
        self.ms = 0
        self.folder = tempfile.mkdtemp(prefix="killable-queue-")
        self.path = str(Path(self.folder) / "jobs.db")
        self.producer = self._connect()
        self.workers = [Worker(i, self._connect(), due=0) for i in range(workers)]
        self.outbox = []
        self.events = collections.deque(maxlen=EVENTS_KEPT)
        self.events_logged = 0
        self.enqueued = 0
        self.holder = {}                 # (job id, token) -> the worker that made the claim
        self.last_holder = {}            # job id -> the worker that claimed it last
        self.last_claim = {}             # job id -> its latest claim's history entry
        self.announced = set()           # (job id, token) of claims whose lease we said ran out
        # What the picture draws, for the last HISTORY_SECONDS: each claim on
        # its worker's lane, and when workers died and were started again.
        self.claims, self.deaths, self.restarts = [], [], []
        self.queued_at_start = check("jobs", jobs, self.SETTINGS["jobs"])
        if jobs:
            self.enqueue(jobs)

    # ---- the clock and the connections

    def now(self):
        """The virtual clock, in seconds; every tinyq.Queue here reads it."""
        return self.ms / 1000

    def _connect(self):
        return tinyq.Queue(self.path, lease=self.lease, clock=self.now)

    def close(self):
        """Close every connection and remove the database folder."""
        for queue in [self.producer] + [w.queue for w in self.workers if w.alive]:
            queue.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    # ---- what the reader does

    @action
    def enqueue(self, n=1):
        """The producer queues n welcome emails."""
        check("n", n, (int, 1, 20))
        for _ in range(n):
            address = address_for(self.enqueued)
            self.enqueued += 1
            job_id = self.producer.enqueue("welcome_email", {"address": address})
            self._log("enqueued", f"the producer queued job {job_id}: "
                                  f"a welcome email to {address}")

    @action
    def kill(self, worker_index):
        """Kill worker 0, 1 or 2 at once, whatever it is doing. Returns why
        not, if it is dead already."""
        worker = self._worker(worker_index)
        if not worker.alive:
            return f"{worker.name} is dead already"
        if worker.job is None:
            self._log("killed", f"{worker.name} was killed; it held no job")
        else:
            where = ("after sending the email, before acknowledging it" if worker.phase == "sent"
                     else "before sending the email")
            self._log("killed", f"{worker.name} was killed holding job {worker.job.id}, {where}")
            self.earned.add("die-holding")
            self._end_claim(worker, "killed")
        self.deaths.append({"worker": worker.index, "time": self.now()})
        worker.queue.close()             # a dead process's connection goes with it
        worker.queue, worker.job, worker.phase, worker.due = None, None, "dead", None
        return None

    @action
    def restart(self, worker_index):
        """Start a new worker in a dead one's place. Returns why not, if it runs."""
        worker = self._worker(worker_index)
        if worker.alive:
            return f"{worker.name} is running already"
        # A new process: a new connection, and no memory of what the old one held.
        worker.queue, worker.phase, worker.due = self._connect(), "idle", self.ms
        self.restarts.append({"worker": worker.index, "time": self.now()})
        self._log("restarted", f"{worker.name} was restarted: a new process that holds nothing")
        return None

    @action
    def set_lease(self, seconds):
        """The lease of every claim from now on; claims made already keep theirs."""
        self.lease = self._checked_lease(seconds)
        for worker in self.workers:
            if worker.alive:
                worker.queue.lease = self.lease   # tinyq reads it at each claim
        lease = say_seconds(to_ms(self.lease))
        self._log("lease", f"the lease is now {lease} for claims from now on")

    @action
    def tick(self, seconds=0.1):
        """Move the clock on, doing everything that falls due on the way."""
        check("seconds", seconds, (float, 0.001, 600))
        self._run_until(self.ms + max(1, to_ms(seconds)))

    @action
    def step(self):
        """Move the clock to the next moment something happens, and do it.
        An idle worker polling an empty queue is not something."""
        logged_before = self.events_logged
        for _ in range(10_000):
            if not self._anything_pending():
                break
            self._run_until(max(self.ms, self._next_due()))
            if self.events_logged > logged_before:
                return None
        return "nothing is waiting to happen: enqueue a job, or restart a worker"

    # ---- the engine

    def _checked_lease(self, seconds):
        return float(round(check("lease", seconds, self.SETTINGS["lease"]), 3))

    def _worker(self, index):
        return self.workers[check("worker", index, (int, 0, len(self.workers) - 1))]

    def _run_until(self, target):
        """Run every due moment up to target, in time order, then stop the clock there."""
        while True:
            due = self._next_due()
            if due is None or due > target:
                break
            self.ms = max(self.ms, due)
            self._run_moment()
        self.ms = target
        self._forget_old_history()

    def _next_due(self):
        dues = [w.due for w in self.workers if w.alive]
        dues += [until for until, _ in self._leases_to_announce()]
        return min(dues, default=None)

    def _run_moment(self):
        """Everything due now, in a fixed order: leases that ran out, then
        the workers, first to last."""
        for until, claim in sorted(self._leases_to_announce()):
            if until <= self.ms:
                self._announce_expiry(claim)
        for worker in self.workers:
            if worker.alive and worker.due <= self.ms:
                self._move_on(worker)

    def _move_on(self, worker):
        """An idle worker polls; a sending one has sent; a sent one acks."""
        if worker.phase == "idle":
            self._claim(worker)
        elif worker.phase == "sending":
            self._send(worker)
        else:
            self._ack(worker)

    def _leases_to_announce(self):
        """[(when the lease runs out, (job id, token))] for each running claim
        whose expiry is still to be told."""
        return [(to_ms(job["locked_until"]), (job["id"], job["token"]))
                for job in self.producer.jobs()
                if job["status"] == "running" and (job["id"], job["token"]) not in self.announced]

    def _announce_expiry(self, claim):
        self.announced.add(claim)
        still = " and is still working on it" if self._owner(claim) else ""
        self._log("expired", f"job {claim[0]}'s lease expired; {self.holder[claim]} held it{still}")

    def _owner(self, claim):
        """The worker that holds this claim now, if any (a dead worker holds
        nothing)."""
        for worker in self.workers:
            if worker.job is not None and (worker.job.id, worker.job.token) == claim:
                return worker
        return None

    def _anything_pending(self):
        busy = any(w.phase in ("sending", "sent") for w in self.workers)
        someone_idle = any(w.phase == "idle" for w in self.workers)
        counts = self.producer.counts()
        waiting = counts["queued"] + counts["running"]
        return busy or bool(self._leases_to_announce()) or (someone_idle and waiting > 0)

    # ---- a worker's life, one phase at a time

    def _claim(self, worker):
        job = worker.queue.claim()
        if job is None:
            worker.due = self.ms + to_ms(POLL_SECONDS)
            return
        previous = self.last_holder.get(job.id)
        before = self.last_claim.get(job.id)
        self.holder[job.id, job.token] = worker.name
        self.last_holder[job.id] = worker.name
        worker.job, worker.phase, worker.due = job, "sending", self.ms + to_ms(SEND_SECONDS)
        worker.claim = {"worker": worker.index, "job": job.id, "token": job.token,
                        "claimed": self.now(), "sent": None, "ended": None, "end": None,
                        "lease_until": (self.ms + to_ms(worker.queue.lease)) / 1000,
                        "duplicate": False, "took_over": None}
        self.claims.append(worker.claim)
        self.last_claim[job.id] = worker.claim
        if job.attempts == 1:
            self._log("claimed", f"{worker.name} claimed job {job.id} (attempt 1)")
            return
        # tinyq claims a running job only when its lease has run out: a takeover.
        # The picture draws the handover, from where that lease ran out.
        worker.claim["took_over"] = {"worker": before["worker"], "token": before["token"],
                                     "lease_until": before["lease_until"]}
        if previous == worker.name:
            previous = f"the earlier {previous}"
        self._log("takeover", f"{worker.name} took over job {job.id} from {previous} "
                              f"(attempt {job.attempts})")
        self.earned.add("takeover")

    def _send(self, worker):
        job = worker.job
        address = job.args["address"]
        duplicate = any(email["job"] == job.id for email in self.outbox)
        self.outbox.append({"n": len(self.outbox) + 1, "time": self.now(), "job": job.id,
                            "address": address, "worker": worker.name, "duplicate": duplicate})
        note = f": a duplicate, job {job.id} was emailed before" if duplicate else ""
        self._log("duplicate" if duplicate else "sent",
                  f"{worker.name} sent the email for job {job.id} to {address}{note}")
        if duplicate:
            self.earned.add("duplicate")
        worker.claim["sent"], worker.claim["duplicate"] = self.now(), duplicate
        worker.phase, worker.due = "sent", self.ms + to_ms(ACK_SECONDS)

    def _ack(self, worker):
        job = worker.job
        worker.job, worker.phase = None, "idle"
        try:
            worker.queue.finish(job, "done")
        except tinyq.LeaseLost:
            # The fencing token is stale: the row is someone else's now.
            self._end_claim(worker, "lost")
            self._log("lost", f"{worker.name} lost job {job.id}: another worker holds it, "
                              f"so its acknowledgement changed nothing")
        else:
            self._end_claim(worker, "done")
            self._log("done", f"{worker.name} acknowledged job {job.id}: done")
        self._claim(worker)              # a worker asks for its next job at once

    def _end_claim(self, worker, how):
        worker.claim["ended"], worker.claim["end"] = self.now(), how
        worker.claim = None

    def _forget_old_history(self):
        """Keep what the last HISTORY_SECONDS can show: a claim still open, or
        whose end or lease falls inside them (a dead worker's lease runs on)."""
        since = self.ms - to_ms(HISTORY_SECONDS)

        def last_seen(claim):
            if claim["end"] == "killed":
                return max(claim["ended"], claim["lease_until"])
            return claim["ended"]
        self.claims = [claim for claim in self.claims
                       if claim["ended"] is None or to_ms(last_seen(claim)) > since]
        self.deaths = [death for death in self.deaths if to_ms(death["time"]) > since]
        self.restarts = [start for start in self.restarts if to_ms(start["time"]) > since]

    def _log(self, kind, text):
        self.events_logged += 1
        self.events.append({"n": self.events_logged, "time": self.now(), "kind": kind,
                            "text": f"{say_seconds(self.ms)}: {text}"})

    # ---- what the page shows

    def state(self):
        return {
            "time": self.now(),
            "lease": self.lease,
            "queued_at_start": self.queued_at_start,
            "timing": {"send": SEND_SECONDS, "ack": ACK_SECONDS, "poll": POLL_SECONDS},
            "workers": [self._worker_state(w) for w in self.workers],
            "jobs": self._jobs_state(),
            "outbox": [dict(email) for email in self.outbox],
            "events": list(self.events),
            "tasks": self.tasks(),
            "history": {"seconds": HISTORY_SECONDS,
                        "claims": [self._claim_state(claim) for claim in self.claims],
                        "deaths": [dict(death) for death in self.deaths],
                        "restarts": [dict(start) for start in self.restarts]},
        }

    def _claim_state(self, claim):
        left = max(to_ms(claim["lease_until"]) - self.ms, 0) / 1000
        return {**claim, "took_over": claim["took_over"] and dict(claim["took_over"]),
                "lease_left": left}

    def _worker_state(self, worker):
        busy = worker.phase in ("sending", "sent")
        return {
            "index": worker.index,
            "name": worker.name,
            "alive": worker.alive,
            "phase": worker.phase,
            "job": worker.job.id if worker.job else None,
            "seconds_left": round((worker.due - self.ms) / 1000, 3) if busy else None,
        }

    def _jobs_state(self):
        return [{
            "id": job["id"],
            "address": job["args"]["address"],
            "status": job["status"],
            "attempts": job["attempts"],
            "token": job["token"] or None,
            "holder": self.holder.get((job["id"], job["token"])),
            "lease_left": (round(job["locked_until"] - self.now(), 3)
                           if job["status"] == "running" else None),
        } for job in self.producer.jobs()]


# ---- the text program: one scripted story

def story():
    """Three jobs; worker 1 is killed after sending its email and before
    acknowledging it; its lease runs out and another worker sends it again."""
    sim = KillableQueue()
    shown = 0

    def show_new_events():
        nonlocal shown
        for event in sim.events:
            if event["n"] > shown:
                print(event["text"])
        shown = sim.events_logged

    def run_until(condition):
        while not condition():
            sim.tick(0.1)
            show_new_events()

    try:
        print(f"lease {sim.lease:g} s; {len(sim.workers)} workers; "
              f"sending takes {SEND_SECONDS:g} s, acknowledging {ACK_SECONDS:g} s later")
        sim.enqueue(3)
        show_new_events()
        run_until(lambda: sim.workers[0].phase == "sent")
        sim.tick(0.2)                    # between the send and the acknowledgement
        show_new_events()
        sim.kill(0)
        show_new_events()
        run_until(lambda: "takeover" in sim.earned)
        run_until(lambda: all(job["status"] == "done" for job in sim.state()["jobs"]))
        print_outbox(sim.state())
    finally:
        sim.close()


def print_outbox(state):
    print("\noutbox:")
    for email in state["outbox"]:
        mark = "  (duplicate)" if email["duplicate"] else ""
        print(f"  {email['n']}. {email['time']:5.1f} s  job {email['job']} to "
              f"{email['address']}, sent by {email['worker']}{mark}")
    print("\njobs table:")
    print("  id  status   attempts  token")
    for job in state["jobs"]:
        print(f"  {job['id']:2}  {job['status']:7}  {job['attempts']:8}  {job['token'] or '-'}")


def main(argv=None):
    parser = argparse.ArgumentParser(description="The killable queue, as a scripted story.")
    parser.parse_args(argv)
    story()


if __name__ == "__main__":
    main()
