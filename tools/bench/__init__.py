"""make bench: build time, page weight, queue and simulation numbers.

Run as `PYTHONPATH=tools python -m bench` (__main__.py); queues.py and sims.py
are its parts."""
