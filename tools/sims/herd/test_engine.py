"""The thundering herd's engine (tools/sims/herd/engine.py) against its
source, code/herd.py, and Brooker's findings over 20 seeds; the figures and
the picture Chapter 6 quotes from it; its tasks and its text program."""
import collections
import statistics

import pytest

from tests.helpers import GUIDE, PROSE, ask, earned, run_program
from tools import course
from tools.sims.herd import engine as herd
from tools.sims.herd.engine import Herd


SEEDS = range(1, 21)


def runs(policy, **settings):
    return [herd.summary(herd.contend(policy, seed=seed, **settings)) for seed in SEEDS]


def mean(values):
    return statistics.fmean(values)


def test_without_jitter_the_clients_stay_in_step():
    """Exponential backoff without jitter: every client turned away at the
    same instant calls again at the same instant, round after round, one
    getting through each time; with any jitter, no two calls coincide."""
    calls = herd.contend("exponential")
    at_once = collections.Counter(time for time, _, _ in calls if time > 0)
    crowds = sorted(at_once.values(), reverse=True)
    assert crowds[:50] == list(range(99, 49, -1))
    for policy in ("full", "equal", "decorrelated"):
        assert herd.summary(herd.contend(policy))["in_step"] == 1, policy


def test_full_jitter_cuts_the_calls_by_more_than_half():
    exponential = runs("exponential")
    for seed, full in zip(SEEDS, runs("full")):
        assert full["calls"] < exponential[seed - 1]["calls"] / 2, seed


# Brooker's article, on 100 clients or so: no jitter is the clear loser,
# in work and in time; equal jitter is the loser of the jittered methods,
# slightly more work than full jitter and much longer; full jitter does
# less work than decorrelated jitter, and takes slightly more time. Each
# row must stand so to the others, over 20 seeds, at the chapter's 100.

def test_without_jitter_the_clients_do_the_most_work():
    """Brooker's clear loser: without jitter, every seed makes more than
    three times the calls of every jittered policy; exponential backoff
    without jitter also takes longer than any of them."""
    exponential, none = runs("exponential"), runs("none")
    for policy in ("full", "equal", "decorrelated"):
        for seed, jittered in zip(SEEDS, runs(policy)):
            assert none[seed - 1]["calls"] > 3 * jittered["calls"], (policy, seed)
            assert exponential[seed - 1]["calls"] > 3 * jittered["calls"], (policy, seed)
            assert exponential[seed - 1]["seconds"] > 10 * jittered["seconds"], (policy, seed)


def test_equal_jitter_is_the_loser_of_the_jittered_policies():
    """Equal jitter makes slightly more calls than full jitter (up to 10%
    more on average) and takes much longer (over 20% longer on average,
    and longer on every seed); and it takes longer than decorrelated
    jitter on every seed."""
    full, equal, decorrelated = runs("full"), runs("equal"), runs("decorrelated")
    calls = mean(r["calls"] for r in equal) / mean(r["calls"] for r in full)
    seconds = mean(r["seconds"] for r in equal) / mean(r["seconds"] for r in full)
    assert 1 < calls < 1.1, calls
    assert seconds > 1.2, seconds
    assert all(e["seconds"] > f["seconds"] for e, f in zip(equal, full))
    assert all(e["seconds"] > d["seconds"] for e, d in zip(equal, decorrelated))


def test_full_jitter_does_less_work_than_decorrelated_and_takes_slightly_longer():
    """Full jitter makes fewer calls than decorrelated jitter on every seed,
    and takes more time on average, but less than 10% more."""
    full, decorrelated = runs("full"), runs("decorrelated")
    assert all(f["calls"] < d["calls"] for f, d in zip(full, decorrelated))
    seconds = mean(r["seconds"] for r in full) / mean(r["seconds"] for r in decorrelated)
    assert 1 < seconds < 1.1, seconds


def test_every_client_gets_its_write_through_once():
    for policy in herd.POLICIES:
        calls = herd.contend(policy, clients=30)
        assert sorted(client for _, client, taken in calls if taken) == list(range(30)), policy


@pytest.mark.parametrize("policy", ["none", "full", "decorrelated"])
def test_a_write_is_taken_only_if_none_was_taken_since_its_read(policy):
    """Optimistic concurrency, as in Brooker's model: a write arriving at
    t read the record a round trip before; it is taken if and only if no
    write answered before it was taken at or after that read."""
    calls = herd.contend(policy, clients=40)
    assert [time for time, _, _ in calls] == sorted(time for time, _, _ in calls)
    for n, (time, client, ok) in enumerate(calls):
        read_at = time - herd.ROUND_TRIP_SECONDS
        since = [other for other, _, taken in calls[:n] if taken and other >= read_at]
        assert ok == (not since), (time, client)


def test_the_waits_are_the_policies():
    dice = collections.namedtuple("Dice", "uniform")(lambda low, high: high)   # the longest
    assert [herd.wait("exponential", n, 0, 0.01, 0.05, None) for n in (1, 2, 3, 4)] == \
        [0.01, 0.02, 0.04, 0.05]
    assert herd.wait("full", 3, 0, 0.01, 1.0, dice) == 0.04
    assert herd.wait("equal", 3, 0, 0.01, 1.0, dice) == 0.04
    assert herd.wait("decorrelated", 3, 0.5, 0.01, 1.0, dice) == 1.0      # 3 × 0.5, capped
    assert herd.wait("none", 7, 0, 0.01, 1.0, dice) == 0.0


def test_the_same_seed_gives_the_same_herd():
    assert Herd(policy="full", seed=4).state() == Herd(policy="full", seed=4).state()
    assert Herd(policy="full", seed=4).state() != Herd(policy="full", seed=5).state()


def test_the_herd_refuses_settings_out_of_range():
    with pytest.raises(ValueError, match="clients must be a whole number from 1 to 500, not 0"):
        Herd(clients=0)
    with pytest.raises(ValueError, match="policy must be none or exponential"):
        Herd().configure(policy="linear")
    with pytest.raises(ValueError, match="unknown setting 'writers'"):
        Herd().configure(writers=2)


def test_the_herd_answers_the_page(instances):
    state = ask("herd", "h", "new", {"policy": "full", "clients": 20})["state"]
    assert state["calls"] == sum(c["taken"] + c["turned_away"] for c in state["timeline"])
    assert set(state["policies"]) == set(herd.POLICIES)


def test_the_herd_program_prints_every_policy_and_a_timeline():
    output = run_program("herd", "--clients", "50", "--policy", "full")
    for name in herd.NAMES.values():
        assert f" {name} " in output
    assert "full jitter: calls over time, 50 slices" in output


def test_no_task_is_done_before_the_reader_changes_anything():
    """Where a simulation starts is not something the reader did: the herd
    in step at the start earns nothing yet."""
    assert earned(Herd().state()) == set() and Herd().state()["in_step"] == 99


def test_the_herd_tasks_are_earned_by_doing_them():
    sim = Herd(policy="full")
    assert earned(sim.state()) == set()
    sim.configure(policy="exponential", clients=3)          # too few to call it a herd
    assert earned(sim.state()) == set()
    sim.configure(clients=100)
    assert earned(sim.state()) == {"herd"}
    sim.configure(policy="full", cap=0.02)                  # 2,344 calls: under half of 5,050
    assert earned(sim.state()) == {"herd"}
    sim.configure(cap=0.01)                                 # 2,682: more than half
    assert earned(sim.state()) == {"herd", "cap"}
    sim.configure(cap=0.2)                                  # 1,235 calls in 2.548 s
    assert earned(sim.state()) == {"herd", "cap"}
    sim.configure(policy="decorrelated")                    # 1,146 calls in 2.795 s
    assert earned(sim.state()) == {"herd", "cap", "quick"}


# ---- what Chapter 6 says the engine gave

def test_the_herd_engine_runs_the_readers_herd_py_as_chapter_6_describes_it():
    """The table in Chapter 6 is herd.py's own output (its transcript holds
    it); the simulation gives the same runs, with the model the text
    describes: 100 clients, a round trip of 20 ms, waits from 5 ms up to
    2 s, seed 1."""
    herd_py = course.module("herd.py")
    assert Herd().settings == {"policy": "exponential", "clients": 100, "base": 0.005,
                               "cap": 2.0, "seed": 1}
    assert herd_py.ROUND_TRIP_SECONDS == 0.020
    assert "a round trip of 20 ms" in PROSE and "from a base of 5 ms, with a cap of 2 s" in PROSE
    for policy in herd.POLICIES:
        assert Herd(policy=policy).state()["calls"] == \
            herd_py.summary(herd_py.contend(policy))["calls"], policy


def test_chapter_6_quotes_the_herd_over_twenty_seeds():
    average = {policy: {key: mean(r[key] for r in runs(policy)) for key in ("calls", "seconds")}
               for policy in ("full", "equal", "decorrelated")}
    said = ("Over 20 seeds, on average: full jitter {full[calls]:,.0f} calls in "
            "{full[seconds]:.2f} s, equal jitter {equal[calls]:,.0f} in {equal[seconds]:.2f} s, "
            "decorrelated jitter {decorrelated[calls]:,.0f} in {decorrelated[seconds]:.2f} s."
            ).format(**average)
    assert said in PROSE


def test_chapter_6s_drill_asks_about_what_a_cap_of_10_ms_does():
    """Chapter 6's optional drill (in "Watching a Herd with herd.py"), with
    the reader's own herd.py (code/'s): with a cap of half a round trip,
    full jitter still makes more than half the calls of no jitter, and
    decorrelated clients that draw past the cap are in step again. The
    drill asks; these are its answers."""
    herd_py = course.module("herd.py")
    assert herd_py.ROUND_TRIP_SECONDS / 2 == 0.01
    full, exponential, decorrelated = (herd_py.summary(herd_py.contend(policy, cap=0.01))
                                       for policy in ("full", "exponential", "decorrelated"))
    assert full["calls"] > exponential["calls"] / 2
    assert decorrelated["in_step"] > 1
    assert "with a cap of 10 ms, half a round trip" in PROSE
    assert "run `python3 herd.py --cap 0.01` and compare" in PROSE


# ---- the picture's numbers (its view draws these)

def at_each_instant(policy, **settings):
    """How many calls were made at each instant, from the engine's own calls."""
    return collections.Counter(time for time, _, _ in herd.contend(policy, **settings))


@pytest.mark.parametrize("policy", ["exponential", "full", "none"])
def test_the_herd_state_gives_every_clients_calls_slice_by_slice(policy):
    """`rasters`: the chosen run, and beside it one that differs by jitter,
    each cut into SLICES equal slices up to its last write; a row for each
    client with the slices it called in, each once, and the slice of its
    write taken, which is its last call."""
    state = Herd(policy=policy, clients=60).state()
    assert [run["policy"] for run in state["rasters"]] == [policy, herd.BESIDE[policy]]
    for run in state["rasters"]:
        calls = herd.contend(run["policy"], clients=60)
        width = run["seconds"] / herd.SLICES
        called, taken = [set() for _ in range(60)], [None] * 60
        for time, client, ok in calls:
            called[client].add(min(herd.SLICES - 1, int(time / width)))
            if ok:
                taken[client] = min(herd.SLICES - 1, int(time / width))
        assert [row["called"] for row in run["rows"]] == [sorted(each) for each in called]
        assert [row["taken"] for row in run["rows"]] == taken
        assert all(row["taken"] == row["called"][-1] for row in run["rows"])
        assert (run["calls"], run["slices"]) == (len(calls), herd.SLICES)


def test_without_jitter_the_clients_fill_the_same_slices_and_with_it_spread_out():
    """What the picture shows: exponential backoff without jitter puts many
    clients in each slice that has any call (a herd's rounds, as stripes);
    full jitter spreads the same clients thin (a smear)."""
    def average(run):
        busy = {slice for row in run["rows"] for slice in row["called"]}
        return sum(len(row["called"]) for row in run["rows"]) / len(busy)
    full, exponential = Herd(policy="full").state()["rasters"]
    assert exponential["policy"] == "exponential"
    assert average(exponential) > 3 * average(full)


def test_the_herd_state_names_the_first_crowds():
    """`crowds`: the first instants at which two or more clients called
    together. Without jitter they are the rounds of the herd, one client
    fewer each time; with full jitter only the start is a crowd."""
    crowds = Herd(policy="exponential").state()["crowds"]
    counted = at_each_instant("exponential")
    together = sorted((time, count) for time, count in counted.items() if count >= 2)
    assert [(each["time"], each["calls"]) for each in crowds] == together[:herd.CROWDS]
    assert [each["calls"] for each in crowds] == list(range(100, 100 - herd.CROWDS, -1))
    assert Herd(policy="full").state()["crowds"] == [{"time": 0.0, "calls": 100}]


# ---- Chapter 6's picture of the herd, drawn from herd.py's own calls

# The picture: the first PICTURE_COLUMNS columns of PICTURE_COLUMN_SECONDS,
# each as tall as its calls in blocks of PICTURE_BLOCK (a column with 1 to
# 20 calls has one block), PICTURE_ROWS rows high, for each policy.

PICTURE_COLUMN_SECONDS, PICTURE_COLUMNS, PICTURE_BLOCK, PICTURE_ROWS = 0.020, 50, 20, 5
PICTURE_PANELS = {"exponential": "exponential backoff, no jitter:", "full": "full jitter:"}


def herd_picture_panel(policy):
    """A panel of the picture, as the guide draws it: its title, its rows of
    blocks, and the line that says what came after the first second."""
    herd_py = course.module("herd.py")
    calls = herd_py.contend(policy)
    counts = collections.Counter(int(time / PICTURE_COLUMN_SECONDS) for time, _, _ in calls)
    heights = [-(-counts[column] // PICTURE_BLOCK) for column in range(PICTURE_COLUMNS)]
    rows = [("    " + "".join("█" if height >= row else " " for height in heights)).rstrip()
            for row in range(PICTURE_ROWS, 0, -1)]
    later = sum(time >= PICTURE_COLUMNS * PICTURE_COLUMN_SECONDS for time, _, _ in calls)
    last = herd_py.shown(herd_py.summary(calls)["seconds"])
    return [" " + PICTURE_PANELS[policy], *rows,
            "    └────────────────────────┴────────────────────────┘",
            "    0 s" + " " * 22 + "0.5 s" + " " * 20 + "1 s",
            f"    then {later:,} calls more; the last write taken at {last}"]


def herd_picture():
    """The guide's text block that draws the herd: its lines."""
    blocks = [block for block in GUIDE.split("```text\n")[1:]
              if block.startswith(" The herd of herd.py")]
    assert len(blocks) == 1
    return blocks[0].split("\n```")[0].split("\n")


def test_chapter_6s_picture_of_the_herd_is_herd_pys_own_calls():
    """The picture of the herd without and with jitter in Chapter 6 is
    herd.py's run with 100 clients and seed 1: for each 20 ms of the first
    second, as many blocks as its calls in twenties; then how many calls
    came later, and when the last write was taken. No line is wider than
    70 columns."""
    picture = [line.rstrip() for line in herd_picture()]
    assert picture[:2] == [" The herd of herd.py (100 clients, seed 1): the calls in each 20 ms",
                           " of the first second, a block for every 20 calls or part of 20"]
    drawn = [line for policy in PICTURE_PANELS for line in ["", *herd_picture_panel(policy)]]
    assert picture[2:] == drawn
    assert max(len(line) for line in picture) <= 70
    # what the text says of it: a herd without jitter, a smear with it
    exponential = herd_picture_panel("exponential")[1:1 + PICTURE_ROWS]
    full = herd_picture_panel("full")[1:1 + PICTURE_ROWS]
    assert exponential[0].count("█") == 8 and full[0].count("█") == 3
    assert full[-1].count("█") > 3 * exponential[-1].count("█")
