# Exercise 2: The Job: Work Written Down.
# A job is a small piece of data that describes work. A table of handlers
# turns a job's kind into the function that does the work.
#
# Run it:   python3 ex02_jobs.py

import json

# A tiny pretend database, so handlers have something to look up.
USERS = {42: {"name": "Ann", "email": "ann@example.com"}}
PHOTOS = {7: {"file": "beach.jpg", "width": 4000}}


def send_welcome_email(user_id):
    user = USERS[user_id]                # look the user up now, not earlier
    print(f"  handler: emailing {user['email']}: Welcome, {user['name']}!")


def resize_photo(photo_id, width):
    photo = PHOTOS[photo_id]
    print(f"  handler: resizing {photo['file']} "
          f"from {photo['width']} to {width} px wide")


HANDLERS = {
    "welcome_email": send_welcome_email,
    "resize_photo": resize_photo,
}


def make_job(kind, **args):
    if kind not in HANDLERS:
        raise ValueError(f"no handler for job kind {kind!r}")
    return {"kind": kind, "args": args}


def run(job):
    handler = HANDLERS[job["kind"]]
    handler(**job["args"])


def main():
    jobs = [
        make_job("welcome_email", user_id=42),
        make_job("resize_photo", photo_id=7, width=800),
    ]
    for job in jobs:
        text = json.dumps(job)           # what a queue would store
        print(f"stored:  {text}  ({len(text)} bytes)")
        decoded = json.loads(text)       # what a worker would read back
        print(f"decoded: same as the original? {decoded == job}")
        run(decoded)


if __name__ == "__main__":
    main()
