"""The engines behind the course's interactive simulations.

Each engine is plain Python on a virtual clock: no threads, no sleeping, no
wall-clock reads. The same code runs in the reader's browser under Pyodide
(through api.call, which the page's JavaScript calls with JSON), in pytest
(tests/test_sims.py), and as a text program in a terminal:

    python3 tools/sims/killable_queue.py    workers, leases and a kill (Chapters 4-5)
    python3 tools/sims/race.py              two claims, one statement at a time (Chapter 4)
    python3 tools/sims/crash_timing.py      every crash moment against every protection (5-8)
    python3 tools/sims/payment.py           the flaky bank, retries and keys; --o7 (6-8, 10)
"""
