# chaos_pg.py: Chapter 9's chaos monkey with the shop on PostgreSQL.
# chaos.py, shop.py and world_given.py run as they are; this file only
# hands the shop another queue (tinyq_pg's, on the server $DATABASE names)
# and the shop's SQL in PostgreSQL's words. The world stays in world.db: a
# bank does not move when you change databases.
#
# Run it:   python3 chaos_pg.py --seed 1          (chaos.py's options)

import os
import sys

import psycopg

import chaos
import shop
import tinyq_pg
import world_given

DATABASE = os.environ.get("DATABASE", "")

# The shop's table and statements: an identity column numbers the customers
# (in SQLite, INTEGER PRIMARY KEY does it by itself), and psycopg marks a
# value with %s where sqlite3 writes ?.
shop.CUSTOMERS = """
CREATE TABLE IF NOT EXISTS customers (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email   text NOT NULL UNIQUE,
    points  integer NOT NULL DEFAULT 0
)"""
shop.SIGN_UP = "INSERT INTO customers (email) VALUES (%s) RETURNING id"
shop.ADD_POINTS = "UPDATE customers SET points = points + %s WHERE id = %s"


start_with_files = chaos.start_afresh    # chaos.py's own, kept: replaced below


def open_queue():
    """tinyq_pg on the server, with the shop's settings."""
    return tinyq_pg.Queue(
        DATABASE, lease=shop.LEASE_SECONDS, max_attempts=shop.MAX_ATTEMPTS,
        backoff_base=shop.BACKOFF_BASE, backoff_cap=shop.BACKOFF_CAP)


def start_afresh():
    """A server has no file to remove: drop the shop's tables, so that the
    ids start from 1 again, as the seed's dice need. Then chaos.py's own."""
    try:
        with psycopg.connect(DATABASE, autocommit=True) as db:
            db.execute("DROP TABLE IF EXISTS jobs, customers")
    except psycopg.Error as error:
        world_given.give_up([], f"cannot open {DATABASE}: {error}")
    return start_with_files()


# Replaced here, at the top, so that every worker process has them too.
shop.open_queue = open_queue
chaos.start_afresh = start_afresh

if __name__ == "__main__":
    if not DATABASE:
        sys.exit("chaos_pg.py needs the server's address in $DATABASE "
                 "(Chapter 12's lab)")
    sys.exit(chaos.main())
