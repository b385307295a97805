# Exercise 3: The Queue: Where Work Waits.
# Signups put a job on an in-memory queue and answer at once; a worker
# thread in the background sends the emails. Quit early and the waiting
# jobs vanish without a trace.
#
# Run it:   python3 ex03_memory_queue.py
#           python3 ex03_memory_queue.py --quit

import queue
import sys
import threading
import time

MAIL_SERVER_SECONDS = 2
NEW_USERS = ["ann@example.com", "bob@example.com", "cat@example.com"]

jobs = queue.Queue()                     # first in, first out
emails_sent = []
started = time.perf_counter()


def stamp():
    """Seconds since the program started, for the start of each line."""
    return f"[{time.perf_counter() - started:5.2f} s]"


def send_welcome_email(address):
    time.sleep(MAIL_SERVER_SECONDS)
    emails_sent.append(address)
    print(f"{stamp()} worker: welcome email sent to {address}")


def worker():
    while True:
        job = jobs.get()                 # waits until there is a job
        send_welcome_email(**job["args"])
        jobs.task_done()


def signup(address):
    began = time.perf_counter()
    # (the account would be created here, as in Exercise 1)
    jobs.put({"kind": "welcome_email", "args": {"address": address}})
    waited_ms = (time.perf_counter() - began) * 1000
    print(f"{stamp()} signup({address}) answered after {waited_ms:.3f} ms")


def main():
    threading.Thread(target=worker, daemon=True).start()
    for address in NEW_USERS:
        signup(address)
    if "--quit" in sys.argv:
        unsent = len(NEW_USERS) - len(emails_sent)
        print(f"{stamp()} quitting now, {unsent} emails not sent yet")
        return                           # the daemon worker dies with us
    jobs.join()                          # wait until every job is done
    print(f"{stamp()} all {len(emails_sent)} emails sent")


if __name__ == "__main__":
    main()
