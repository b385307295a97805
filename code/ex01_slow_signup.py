# Exercise 1: The Waiter Who Cooks.
# A signup that sends its welcome email while the user waits, so every
# signup is as slow as the mail server.
#
# Run it:   python3 ex01_slow_signup.py

import time

MAIL_SERVER_SECONDS = 2          # how long our pretend mail server takes
NEW_USERS = ["ann@example.com", "bob@example.com", "cat@example.com"]

accounts = []                    # stands in for the users table


def create_account(address):
    accounts.append(address)
    print(f"{address}: account created")


def send_welcome_email(address):
    time.sleep(MAIL_SERVER_SECONDS)      # talking to the mail server
    print(f"{address}: welcome email sent")


def signup(address):
    started = time.perf_counter()
    create_account(address)
    send_welcome_email(address)          # the user waits for this too
    waited = time.perf_counter() - started
    print(f"{address}: signup answered after {waited:.2f} s")


def main():
    started = time.perf_counter()
    for address in NEW_USERS:
        signup(address)
    total = time.perf_counter() - started
    print(f"{len(NEW_USERS)} signups took {total:.2f} s")


if __name__ == "__main__":
    main()
