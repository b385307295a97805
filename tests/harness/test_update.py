"""The update mode (`make transcripts`): the blocks whose output changed are
rewritten, as little as they can be, and every other byte of the guide stays."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tools.harness import catalogue, compare, sessions, update
from tests.harness.demo import (PRODUCER_ADDS_TWO, WORKER_DOES_THEM, WORKER_STARTS, guide_text)
from tests.helpers import as_in_a_terminal

up_to_date = compare.brought_up_to_date


# ---------------------------------------------------------------- one command's lines

def test_lines_that_still_match_stay_as_the_guide_has_them():
    assert up_to_date(["a", "Python 3...", "z"], ["a", "Python 3.11.7", "z"]) == \
        ["a", "Python 3...", "z"]


def test_a_changed_line_keeps_the_guides_close_timing():
    assert up_to_date(["took 2.00 s to send", "done"], ["took 2.04 s to mail", "done"]) == \
        ["took 2.00 s to mail", "done"]
    assert up_to_date(["took 2.00 s to send"], ["took 3.00 s to mail"]) == ["took 3.00 s to mail"]


def test_an_ellipsis_line_stays_where_it_still_stands_for_lines():
    assert up_to_date(["line 1", "...", "line 5", "end"],
                      ["line 1", "line 2", "line 3", "line 4", "line 5", "the end"]) == \
        ["line 1", "...", "line 5", "the end"]
    # the changed lines are shown, not swallowed by the `...`
    assert up_to_date(["a 1", "...", "a 3"], ["b 1", "b 2", "b 3"]) == ["b 1", "...", "b 3"]


def test_lines_added_and_taken_away():
    assert up_to_date(["a", "b", "c"], ["a", "new", "b"]) == ["a", "new", "b"]
    assert up_to_date(["a", "b"], []) == []


# ---------------------------------------------------------------- a guide's blocks

STAMP = """
import os, time
start = time.time()
print(f"stamp pid {os.getpid()}: started")
time.sleep(20)                   # 1 s at the warp: room for a busy machine's stalls
print(f"stamp pid {os.getpid()}: slept {time.time() - start:.2f} s")
print("stamp: done")
"""

# What the guide shows for it: another run's pid, and a close timing.
STAMPED = ("console", """
    $ python3 stamp.py
    stamp pid 4242: started
    stamp pid 4242: slept 20.03 s
    stamp: done
    """)
SENT = ('{.console timewarp="4"}', "$ python3 sender.py 60\nsending\n^C\nstopped\n")
COUNTED = ("console", """
    $ python3 -c "[print('line', n) for n in range(1, 6)]; print('end')"
    line 1
    ...
    line 5
    end
    """)


def guide_and_programs(demo):
    (demo / "stamp.py").write_text(STAMP)
    return guide_text(STAMPED, SENT, WORKER_STARTS, PRODUCER_ADDS_TWO, WORKER_DOES_THEM)


def changed_programs(demo):
    """The stamp says it finished; the worker, that it ran each job."""
    for file_name, old, new in [("stamp.py", "stamp: done", "stamp: finished"),
                                ("worker.py", "worker: did", "worker: ran")]:
        path = demo / file_name
        path.write_text(path.read_text().replace(old, new))


def as_rewritten(text):
    """The guide as the update should leave it, the changed programs' lines only changed."""
    return text.replace("stamp: done", "stamp: finished").replace("worker: did", "worker: ran")


# A command that says nothing for longer than the update mode's QUIET,
# in real time, while its lines are still what the guide shows.
SLOW = ("console", "$ echo one; sleep 1.5; echo two; sleep 30\none\ntwo\n^C\n")


def test_an_unchanged_guide_is_left_byte_for_byte(demo):
    text, lines = guide_and_programs(demo)
    text, slow = text + guide_text(SLOW)[0].removeprefix("# Demo\n\n"), text.count("\n") + 1
    assert sessions.updated_text(text, demo) == (text, [], dict.fromkeys([*lines, slow]))


def test_only_the_blocks_whose_output_changed_are_rewritten(demo):
    """The stamp keeps the guide's pid and timing; the worker's ^C and the
    blocks it did not change stay as they were; a second run changes nothing."""
    text, lines = guide_and_programs(demo)
    changed_programs(demo)
    new_text, rewritten, results = sessions.updated_text(text, demo)
    assert results == dict.fromkeys(lines)
    assert new_text == as_rewritten(text)
    assert rewritten == [lines[0], lines[4]]
    assert sessions.check_text(new_text, demo) == dict.fromkeys(lines)
    assert sessions.updated_text(new_text, demo) == (new_text, [], dict.fromkeys(lines))


def test_a_change_in_a_sessions_first_block_keeps_its_story(demo):
    """The worker's first line changes: the producer still starts after it,
    and the worker's later lines stay in the block that shows them."""
    path = demo / "worker.py"
    path.write_text(path.read_text().replace("waiting for jobs", "ready for jobs"))
    text, lines = guide_text(WORKER_STARTS, PRODUCER_ADDS_TWO, WORKER_DOES_THEM)
    new_text, rewritten, results = sessions.updated_text(text, demo)
    assert new_text == text.replace("waiting for jobs", "ready for jobs")
    assert (rewritten, results) == ([lines[0]], dict.fromkeys(lines))


def test_an_ellipsis_line_is_kept_in_the_guide(demo):
    text, lines = guide_text(COUNTED)
    new_text, rewritten, _ = sessions.updated_text(text.replace("'end'", "'the end'"), demo)
    assert new_text == text.replace("'end'", "'the end'").replace("line 5\nend", "line 5\nthe end")
    assert rewritten == lines


def test_what_follows_a_ctrl_c_stays_on_its_line(demo):
    """A program that no longer starts a new line when interrupted shows
    what it prints on the ^C line, as a terminal does."""
    (demo / "sender.py").write_text((demo / "sender.py").read_text().replace(
        'print("\\nstopped")', 'print("stopped")'))
    text, lines = guide_text(SENT)
    new_text, rewritten, _ = sessions.updated_text(text, demo)
    assert new_text == text.replace("^C\nstopped\n", "^Cstopped\n")
    assert rewritten == lines


@pytest.mark.parametrize("shown", ["producer: added job 1\n", ""],
                         ids=["one line of two", "a new block, its command only"])
def test_lines_a_program_adds_go_into_the_guide(demo, shown):
    text, lines = guide_text(("console", "$ python3 producer.py 2\n" + shown))
    new_text, rewritten, _ = sessions.updated_text(text, demo)
    assert new_text == text.replace("producer.py 2\n" + shown, "producer.py 2\n"
                                    "producer: added job 1\nproducer: added job 2\n")
    assert rewritten == lines


def test_a_block_that_fails_otherwise_is_not_rewritten(demo, monkeypatch):
    """A command still running at the end is an error in update mode too."""
    monkeypatch.setattr(sessions.sandbox, "EXIT_TIMEOUT", 0.5)
    text, lines = guide_text(("console", "$ python3 worker.py\nworker: waiting\n"))
    new_text, rewritten, results = sessions.updated_text(text, demo)
    assert (new_text, rewritten) == (text, [])
    assert "is still running at the end of the block" in results[lines[0]]


def test_a_block_left_empty_is_left_to_the_maintainer(demo):
    """The producer adds one job where the guide's second block shows a
    second: that block would hold nothing, so the update fails it instead."""
    path = demo / "producer.py"
    path.write_text(path.read_text().replace("range(int(sys.argv[1]))", "range(1)"))
    text, lines = guide_text(('{.console session="p"}', "$ python3 producer.py 2\n"
                                                        "producer: added job 1\n"),
                             ('{.console session="p"}', "producer: added job 2\n"))
    new_text, rewritten, results = sessions.updated_text(text, demo)
    assert (new_text, rewritten, results[lines[0]]) == (text, [], None)
    assert results[lines[1]] == (
        f"guide.md:{lines[0] + 1}: `$ python3 producer.py 2` (terminal 1) printed something "
        f"else, and guide.md:{lines[1]} would be left empty:\n--- expected (guide)\n+++ actual"
        f"\n@@ -1,2 +1 @@\n producer: added job 1\n-producer: added job 2")


def test_a_command_still_running_that_no_longer_prints_a_line_is_waited_for(demo, monkeypatch):
    """As in make check: it might be slow. The block fails; its session writes nothing."""
    monkeypatch.setattr(sessions.sandbox, "SYNC_TIMEOUT", 1)
    text, lines = guide_text(WORKER_STARTS, PRODUCER_ADDS_TWO, (
        '{.console session="jobs"}', "worker: did job 1\nworker: did job 2\nworker: did job 3\n"
                                     "^C\nworker: stopped\n"))
    new_text, rewritten, results = sessions.updated_text(text, demo)
    assert (new_text, rewritten) == (text, [])
    assert results[lines[2]] == (
        f"guide.md:{lines[2] + 4}: `$ python3 worker.py` (terminal 1) (from guide.md:"
        f"{lines[0] + 1}) had not printed what the guide shows up to here, after 1 s")


# ---------------------------------------------------------------- writing guide.md

def test_the_guide_is_not_rewritten_if_it_changed_during_the_run(tmp_path):
    path = tmp_path / "guide.md"
    path.write_text("```console\n$ echo a\nb\n```\n")
    edit = {"block": 1, "line": 3, "old": ["b"], "new": ["a"], "indent": ""}
    path.write_text("```console\n$ echo a\nb\n```\nmore\n")
    with pytest.raises(update.Refused, match="guide.md changed on disk during the run"):
        update.rewrite(path, "```console\n$ echo a\nb\n```\n", [edit])
    assert path.read_text() == "```console\n$ echo a\nb\n```\nmore\n"
    assert update.rewrite(path, path.read_text(), [edit]) == [1]
    assert path.read_text() == "```console\n$ echo a\na\n```\nmore\n"
    assert os.listdir(tmp_path) == ["guide.md"]          # no temporary file left behind


def house(tmp_path, demo, text):
    """A copy of the course's tools beside a small guide and its programs."""
    root = tmp_path / "house"
    shutil.copytree(catalogue.ROOT / "tools", root / "tools",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(catalogue.ROOT / "pytest.ini", root)
    shutil.copytree(demo, root / "code")
    (root / "guide.md").write_text(text)
    return root


def update_with_pytest(root):
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "guide.md",
         "--update-transcripts"], cwd=root, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(root)})


def test_pytest_update_transcripts_rewrites_the_guide_once_under_xdist(tmp_path, demo):
    text, lines = guide_and_programs(demo)
    changed_programs(demo)
    root = house(tmp_path, demo, text)
    result = update_with_pytest(root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (root / "guide.md").read_text() == as_rewritten(text)
    assert f"rewrote guide.md:{lines[0]}\nrewrote guide.md:{lines[4]}\n" in result.stdout
    assert result.stdout.count("rewrote ") == 2          # by the controller alone
    again = update_with_pytest(root)
    assert again.returncode == 0 and "no transcript changed" in again.stdout, again.stdout
    assert (root / "guide.md").read_text() == as_rewritten(text)


def test_pytest_update_transcripts_refuses_a_guide_changed_during_the_run(tmp_path, demo):
    text, _ = guide_and_programs(demo)
    changed_programs(demo)
    root = house(tmp_path, demo, "")
    text += f"```console\n$ echo '<!-- a hand -->' >> {root / 'guide.md'}\n```\n"
    (root / "guide.md").write_text(text)
    result = update_with_pytest(root)
    assert result.returncode != 0
    assert "guide.md changed on disk during the run; nothing rewritten" in result.stdout
    assert (root / "guide.md").read_text() == text + "<!-- a hand -->\n"


def test_ctrl_c_rewrites_nothing(tmp_path, demo):
    """Interrupted after a changed block has run: the guide stays as it was."""
    text, _ = guide_and_programs(demo)
    changed_programs(demo)
    root = house(tmp_path, demo, "")
    text += f"```console\n$ touch {tmp_path / 'started'}; sleep 60\n```\n"
    (root / "guide.md").write_text(text)
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "guide.md",
         "--update-transcripts"], cwd=root, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(root)}, preexec_fn=as_in_a_terminal)
    while not (tmp_path / "started").exists() and run.poll() is None:
        time.sleep(0.05)                     # until the last block runs
    run.send_signal(signal.SIGINT)
    output = run.communicate(timeout=60)[0]
    assert run.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "the run did not finish (INTERRUPTED): nothing rewritten" in output
    assert (root / "guide.md").read_text() == text


def test_the_update_mode_never_reads_a_learners_folder():
    """Only code/ may write the guide: with --work, pytest refuses to start."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "guide.md",
         "--update-transcripts", f"--work={catalogue.CODE}"],
        cwd=catalogue.ROOT, capture_output=True, text=True)
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "--update-transcripts rewrites guide.md from code/; it cannot be given with --work" \
        in result.stderr
