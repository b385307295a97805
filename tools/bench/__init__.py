"""make bench: build time, page weight, queue and simulation numbers.

Run as `.venv/bin/python -m tools.bench` (__main__.py); queues.py and sims.py
are its parts."""
