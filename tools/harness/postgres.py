"""A private PostgreSQL server for the tests, the grader and the bench.

`server()` makes a cluster with initdb in a new temporary folder, starts it
listening on a Unix socket in that folder only (no TCP port, so nothing
else on the machine can reach it and two runs never collide), yields its
address (a URL), and at the end stops it and removes the folder. The
binaries come from Debian's `postgresql` package. PostgreSQL refuses to run
as root, so when we are root the server runs as the `postgres` user the
package creates.

    with postgres.server() as address:
        psycopg.connect(address)
"""

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

INSTALL = "sudo apt-get install postgresql"
SERVER_USER = "postgres"                 # made by Debian's package
START_SECONDS = 60


class Unavailable(Exception):
    """No server can be started here; the message says why and what to do."""


def binaries():
    """The folder of initdb and pg_ctl: $POSTGRESQL_BIN if set (a server
    installed elsewhere), else the newest that Debian installs, else
    whatever pg_config on the PATH names."""
    chosen = os.environ.get("POSTGRESQL_BIN")
    if chosen:
        if not (Path(chosen) / "initdb").exists():
            raise Unavailable(f"POSTGRESQL_BIN is {chosen}, which has no initdb")
        return Path(chosen)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda path: int(Path(path).parts[-3]))
    if found:
        return Path(found[-1]).parent
    if shutil.which("pg_config"):
        folder = subprocess.run(["pg_config", "--bindir"], capture_output=True,
                                text=True).stdout.strip()
        if (Path(folder) / "initdb").exists():
            return Path(folder)
    raise Unavailable(f"PostgreSQL is not installed: {INSTALL}")


def unavailable():
    """Why no server can be started here, in one line; None if one can be,
    as far as can be told without starting it."""
    try:
        binaries()
        as_server_user()
        import psycopg  # noqa: F401 (the tests' way in)
    except Unavailable as error:
        return str(error)
    except ImportError:
        return "psycopg is not installed: pip install -r requirements.txt"
    return None


def as_server_user():
    """The command prefix that runs a program as the server's user."""
    if os.getuid() != 0:
        return []
    if not shutil.which("runuser"):
        raise Unavailable("running as root without runuser: cannot start PostgreSQL "
                          "as another user")
    try:
        import pwd
        pwd.getpwnam(SERVER_USER)
    except KeyError:
        raise Unavailable(f"running as root and there is no `{SERVER_USER}` user "
                          f"to run PostgreSQL as: {INSTALL} makes one") from None
    return ["runuser", "-u", SERVER_USER, "--"]


def address(socket_folder, database="postgres"):
    """A URL for libpq, as a reader writes one (postgresql://...), for a
    server that listens only on a Unix socket in socket_folder."""
    return f"postgresql:///{database}?host={socket_folder}&user=postgres"


@contextlib.contextmanager
def server(data_under=None, **settings):
    """Yield the address (a URL) of a new private server. settings: its
    configuration, e.g. fsync="off"; anything not named keeps PostgreSQL's
    default. data_under: a folder to keep the data in (a new folder inside
    it), if not beside the socket in /tmp, which may be in memory."""
    bin_folder = binaries()
    prefix = as_server_user()
    # Short and under /tmp: a Unix socket's path must fit in 107 bytes.
    folder = Path(tempfile.mkdtemp(prefix="pg-", dir="/tmp"))
    data_folder = Path(tempfile.mkdtemp(prefix="pg-", dir=data_under)) if data_under else folder
    if prefix:
        for each in {folder, data_folder}:
            shutil.chown(each, SERVER_USER)
    data, log = data_folder / "data", folder / "server.log"
    options = [f"-c listen_addresses='' -k {folder}"]
    options += [f"-c {name}={value}" for name, value in settings.items()]

    def run(*command):
        result = subprocess.run([*prefix, *command], capture_output=True, text=True)
        if result.returncode != 0:
            details = result.stderr.strip() or result.stdout.strip()
            if log.exists():
                details += "\n" + log.read_text()[-2000:]
            raise Unavailable(f"{Path(command[0]).name} failed: {details}")

    try:
        run(bin_folder / "initdb", "-D", data, "-U", "postgres", "--auth=trust",
            "--encoding=UTF8", "--no-sync")
        run(bin_folder / "pg_ctl", "-D", data, "-l", log, "-o", " ".join(options),
            "-w", "-t", str(START_SECONDS), "start")
        try:
            yield address(folder)
        finally:
            # immediate: the data is thrown away, so there is nothing to save
            run(bin_folder / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
    finally:
        for each in {folder, data_folder}:
            shutil.rmtree(each, ignore_errors=True)


# What `pip install "psycopg[binary]"` puts in a reader's site-packages.
READER_PACKAGES = ("psycopg", "psycopg_binary", "psycopg_binary.libs", "typing_extensions.py")


def reader_packages(folder):
    """A folder holding links to psycopg and what it needs, taken from the
    tests' own environment, and nothing else of it: a transcript's Python,
    which does not see the virtualenv, puts it on its path to have what a
    reader of the PostgreSQL lab has installed."""
    import psycopg
    site = Path(psycopg.__file__).resolve().parent.parent
    Path(folder).mkdir()
    for name in READER_PACKAGES:
        if (site / name).exists():
            os.symlink(site / name, Path(folder) / name)
    return folder
