"""Time warp: the exercises' sleeps pass quickly, yet every clock agrees.

The test harness puts this folder on PYTHONPATH and sets TIMEWARP=FACTOR, so
Python imports this module at start-up, before the exercise runs. Without
TIMEWARP it does nothing. The exercises sleep to stand for slow work (2 s
per email in Exercise 1), so the suite runs fast with no test hooks in
code/: at the harness's factor of 20, Exercise 1 still prints `2.00 s` and
`6.00 s`, and takes about 0.3 s.

A virtual clock runs at real speed plus a skip. sleep(s) notes when it should
end on the virtual clock, really sleeps s/FACTOR, then moves the skip forward
so the virtual clock has reached that moment. The skip only grows, so no clock
runs backwards, and threads sleeping at the same time share one skip: two
threads sleeping 1 s side by side advance the clock by about 1 s, not 2.
Time that is not spent sleeping passes at real speed.

time.sleep, time.time, time.monotonic and time.perf_counter (and their _ns
forms) are warped, and so is the timeout of psycopg's Connection.notifies(),
where the PostgreSQL lab's idle worker waits for a NOTIFY: an import hook
(WarpPsycopg) wraps it when psycopg.connection loads. Before, a chaos run on
PostgreSQL waited out each backoff in real time: 2.4 s a run where SQLite
took 0.3 s. Not warped: other
waits with a timeout (Event.wait, queue.get(timeout=...), Condition.wait),
datetime.now(), and SQLite's own clock (CURRENT_TIMESTAMP, julianday('now')).

With TIMEWARP_CLOCK=FILE, the skip lives in FILE (one double, 8 bytes) rather
than in the process, so every process of a transcript session reads and
raises the same skip: a time one worker writes down means the same to the
next. All the warped clocks are real clocks plus the skip, and the real ones
are shared by every process of the machine, so one skip serves them all.
Each process maps the file into memory (reading the clock costs no system
call) and raises the skip under flock. So while any process of a session
sleeps, time runs fast for all of them: a worker idling in its polling loop
moves the clock on for a worker waiting for a lease to end. Without
TIMEWARP_CLOCK each process has a skip of its own.
"""

import os

if os.environ.get("TIMEWARP"):
    import _thread               # not threading: it would capture the real monotonic
    import time

    FACTOR = float(os.environ["TIMEWARP"])
    CLOCK_FILE = os.environ.get("TIMEWARP_CLOCK")
    real_sleep = time.sleep
    real_monotonic = time.monotonic
    skip_lock = _thread.allocate_lock()
    skip = 0.0                   # seconds the virtual clock is ahead of the real one

    if CLOCK_FILE:
        import fcntl
        import mmap

        def open_clock():
            # Each process opens the file for itself: flock excludes open files,
            # and a forked child would otherwise share its parent's.
            global clock_fd, shared_skip, skip_lock
            clock_fd = os.open(CLOCK_FILE, os.O_RDWR)
            # Reading a double from the mapping costs no system call; an aligned
            # 8-byte load or store is atomic on the machines we run on.
            shared_skip = memoryview(mmap.mmap(clock_fd, 8)).cast("d")
            skip_lock = _thread.allocate_lock()

        open_clock()
        os.register_at_fork(after_in_child=open_clock)

        def current_skip():
            return shared_skip[0]

        def raise_skip(seconds):
            with skip_lock:      # flock does not exclude threads of one process
                fcntl.flock(clock_fd, fcntl.LOCK_EX)
                try:
                    shared_skip[0] = max(shared_skip[0], seconds)
                finally:
                    fcntl.flock(clock_fd, fcntl.LOCK_UN)
    else:
        def current_skip():
            return skip

        def raise_skip(seconds):
            global skip
            with skip_lock:
                skip = max(skip, seconds)

    def warp(real_clock):
        def virtual_clock():
            return real_clock() + current_skip()
        virtual_clock.__name__ = real_clock.__name__
        return virtual_clock

    def warp_ns(real_clock_ns):
        def virtual_clock_ns():
            return real_clock_ns() + round(current_skip() * 1e9)
        virtual_clock_ns.__name__ = real_clock_ns.__name__
        return virtual_clock_ns

    def sleep(seconds):
        wake_at = real_monotonic() + current_skip() + seconds
        real_sleep(seconds / FACTOR)
        raise_skip(wake_at - real_monotonic())

    for name in ("time", "monotonic", "perf_counter"):
        setattr(time, name, warp(getattr(time, name)))
        setattr(time, name + "_ns", warp_ns(getattr(time, name + "_ns")))
    time.sleep = sleep

    def warp_notifies(notifies):
        """psycopg's Connection.notifies, its timeout warped as sleep is: a
        wait that no notification ends lasts timeout/FACTOR, and then the
        clocks have seen all of it."""
        def warped(self, *, timeout=None, stop_after=None):
            if timeout is None:
                return (yield from notifies(self, stop_after=stop_after))
            wake_at = real_monotonic() + current_skip() + timeout
            received = 0
            for notify in notifies(self, timeout=timeout / FACTOR, stop_after=stop_after):
                received += 1
                yield notify
            if stop_after is None or received < stop_after:      # it timed out
                raise_skip(wake_at - real_monotonic())
        return warped

    class WarpPsycopg:
        """Finds psycopg.connection as Python would, and warps its
        notifies() once it is loaded: tinyq_pg's idle worker waits there."""
        def find_spec(self, name, path, target=None):
            if name != "psycopg.connection":
                return None
            import importlib.machinery
            spec = importlib.machinery.PathFinder.find_spec(name, path, target)
            if spec is not None:
                load = spec.loader.exec_module

                def exec_module(module):
                    load(module)
                    module.Connection.notifies = warp_notifies(module.Connection.notifies)
                spec.loader.exec_module = exec_module
            return spec

    import sys
    sys.meta_path.insert(0, WarpPsycopg())
