"""Time warp: the exercises' sleeps pass quickly, yet every clock agrees.

The test harness puts this folder on PYTHONPATH and sets TIMEWARP=FACTOR, so
Python imports this module at start-up, before the exercise runs. Without
TIMEWARP it does nothing.

A virtual clock runs at real speed plus a skip. sleep(s) notes when it should
end on the virtual clock, really sleeps s/FACTOR, then moves the skip forward
so the virtual clock has reached that moment. The skip only grows, so no clock
runs backwards, and threads sleeping at the same time share one skip: two
threads sleeping 1 s side by side advance the clock by about 1 s, not 2.

time.sleep, time.time, time.monotonic and time.perf_counter (and their _ns
forms) are warped. Not warped: waits with a timeout (Event.wait,
queue.get(timeout=...), Condition.wait), datetime.now(), and SQLite's own
clock (CURRENT_TIMESTAMP, julianday('now')).

Each process has its own skip, so two warped processes drift apart. The
chapters with several worker processes and leases will need a clock shared
across processes, for example one scaled from a common start instant passed
in the environment (virtual = start + FACTOR * real time since start).
"""

import os

if os.environ.get("TIMEWARP"):
    import _thread               # not threading: it would capture the real monotonic
    import time

    FACTOR = float(os.environ["TIMEWARP"])
    real_sleep = time.sleep
    real_monotonic = time.monotonic
    skip_lock = _thread.allocate_lock()
    skip = 0.0                   # seconds the virtual clock is ahead of the real one

    def warp(real_clock):
        def virtual_clock():
            return real_clock() + skip
        virtual_clock.__name__ = real_clock.__name__
        return virtual_clock

    def warp_ns(real_clock_ns):
        def virtual_clock_ns():
            return real_clock_ns() + round(skip * 1e9)
        virtual_clock_ns.__name__ = real_clock_ns.__name__
        return virtual_clock_ns

    def sleep(seconds):
        global skip
        wake_at = real_monotonic() + skip + seconds
        real_sleep(seconds / FACTOR)
        with skip_lock:
            skip = max(skip, wake_at - real_monotonic())

    for name in ("time", "monotonic", "perf_counter"):
        setattr(time, name, warp(getattr(time, name)))
        setattr(time, name + "_ns", warp_ns(getattr(time, name + "_ns")))
    time.sleep = sleep
