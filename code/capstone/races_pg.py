# races_pg.py: chapter 12's races, on a real PostgreSQL server. Two workers,
# A and B, run the same statement at the same moment. A's transaction stays
# open while B runs, the worst timing, which a busy system meets by chance
# sooner or later; here it is arranged, so every run prints the same.
#   Claims: the claim without FOR UPDATE, with it, and with SKIP LOCKED.
#   Admission: ex09's admit(), one statement counting and inserting, under
#   READ COMMITTED; then with a row per tenant; then under SERIALIZABLE.
#
# Needs a server and psycopg 3 (chapter 12 says how to get both):
#           python3 races_pg.py postgresql://localhost/scratch
# It makes its own tables, race_jobs, race_work and race_tenants, and drops
# them at the end.

import sys
import threading
import time

try:
    import psycopg
except ImportError:
    sys.exit('races_pg.py needs psycopg 3: pip install "psycopg[binary]"')

PICK = "SELECT id FROM race_jobs WHERE status = 'queued' ORDER BY id LIMIT 1"
CLAIMS = {
    "without FOR UPDATE": PICK,
    "FOR UPDATE": PICK + " FOR UPDATE",
    "FOR UPDATE SKIP LOCKED": PICK + " FOR UPDATE SKIP LOCKED",
}
MAX_WAITING = 5                   # as in ex09: how many may wait per tenant

# ex09's admit() for PostgreSQL: the count and the insert are one statement.
ADMIT = """
INSERT INTO race_work (id, tenant) SELECT %(id)s, 'North'
WHERE (SELECT count(*) FROM race_work WHERE tenant = 'North') < %(limit)s
RETURNING id
"""
# The cure by a row per tenant: every admission first updates its tenant's
# row. A second admission's UPDATE waits for the first to commit, and the
# INSERT after it, a new statement, counts what the first committed.
LOCK_TENANT = ("UPDATE race_tenants SET admissions = admissions + 1 "
               "WHERE name = 'North'")


def claim(db, pick):
    rows = db.execute("UPDATE race_jobs SET status = 'running'"
                      f" WHERE id = ({pick}) RETURNING id").fetchall()
    return f"job {rows[0][0]}" if rows else "nothing"


def admit(db, operation, lock_tenant=False):
    if lock_tenant:
        db.execute(LOCK_TENANT)
    rows = db.execute(ADMIT,
                      {"id": operation, "limit": MAX_WAITING}).fetchall()
    return "admitted" if rows else "refused"


def a_then_b(dsn, act, isolation="READ COMMITTED"):
    """act(db, "A") in A's transaction, kept open while act(db, "B") runs in
    B's, in a thread; then A commits, then B. Returns what each got, with
    ", after waiting for A" where B waited for a lock that A held."""
    a, b = psycopg.connect(dsn), psycopg.connect(dsn)
    got = {}
    try:
        level = psycopg.IsolationLevel[isolation.replace(" ", "_")]
        for db in (a, b):      # for every transaction on it, a retry included
            db.isolation_level = level
        got["A"] = act(a, "A")
        thread = threading.Thread(
            target=lambda: got.setdefault("B", act(b, "B")))
        thread.start()
        waited = waiting_for_a_lock(a, b.info.backend_pid, thread)
        commit(a, act, "A", got)
        thread.join()
        got["B"] += ", after waiting for A" if waited else ", at once"
        commit(b, act, "B", got)
        return got
    finally:
        a.close()
        b.close()


def commit(db, act, name, got):
    """Commit; if the commit fails to serialize, try the whole transaction
    again, once, as SERIALIZABLE asks, and say so in got[name]."""
    try:
        db.commit()
    except psycopg.errors.SerializationFailure:
        db.rollback()
        got[name] = f"could not serialize; again: {act(db, name)}"
        db.commit()


def waiting_for_a_lock(a, pid, thread):
    """Whether backend `pid` blocks on a lock, asked of the server (through
    A's connection, which is idle) until it does or `thread` ends."""
    while thread.is_alive():
        row = a.execute("SELECT wait_event_type FROM pg_stat_activity "
                        "WHERE pid = %s", (pid,)).fetchone()
        if row and row[0] == "Lock":
            return True
        time.sleep(0.01)
    return False


def show_claims(dsn, admin):
    print("Claims: jobs 1, 2 and 3 are queued. A claims and keeps its "
          "transaction open; B claims.")
    for name, pick in CLAIMS.items():
        admin.execute("TRUNCATE race_jobs")
        admin.execute("INSERT INTO race_jobs VALUES "
                      "(1, 'queued'), (2, 'queued'), (3, 'queued')")
        got = a_then_b(dsn, lambda db, worker: claim(db, pick))
        same = got["B"].startswith(got["A"] + ",")
        twice = "   <- one job, two workers" if same else ""
        print(f"  {name:24} A: {got['A']}   B: {got['B']}{twice}")


def show_admission(dsn, admin):
    print("Admission: North has 4 operations waiting and may have "
          f"{MAX_WAITING}. A and B each ask for one more.")
    ways = {"one statement": ("READ COMMITTED", False),
            "a row per tenant first": ("READ COMMITTED", True),
            "one statement, SERIALIZABLE": ("SERIALIZABLE", False)}
    for name, (isolation, lock_tenant) in ways.items():
        admin.execute("TRUNCATE race_work")
        admin.execute("INSERT INTO race_work SELECT 'N' || n, 'North'"
                      " FROM generate_series(1, 4) AS n")
        got = a_then_b(dsn, lambda db, worker: admit(db, worker, lock_tenant),
                       isolation)
        (waiting,) = admin.execute("SELECT count(*) FROM race_work").fetchone()
        over = "   <- over the limit" if waiting > MAX_WAITING else ""
        print(f"  {name:29} A: {got['A']}   B: {got['B']}")
        print(f"  {'':29} {waiting} waiting{over}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python3 races_pg.py postgresql://HOST/DATABASE")
    try:
        admin = psycopg.connect(sys.argv[1], autocommit=True)
    except psycopg.OperationalError as error:
        sys.exit(f"cannot connect to {sys.argv[1]}: {error}")
    with admin:
        admin.execute("""
            CREATE TABLE race_jobs (id integer PRIMARY KEY,
                                    status text NOT NULL);
            CREATE TABLE race_work (id text PRIMARY KEY,
                                    tenant text NOT NULL);
            CREATE TABLE race_tenants (name text PRIMARY KEY,
                                       admissions integer NOT NULL);
            INSERT INTO race_tenants VALUES ('North', 0);
        """)
        try:
            show_claims(sys.argv[1], admin)
            print()
            show_admission(sys.argv[1], admin)
        finally:
            admin.execute("DROP TABLE race_jobs, race_work, race_tenants")


if __name__ == "__main__":
    main()
