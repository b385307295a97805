"""tools/load.py counts what the issue's goals are measured in: lines typed,
once each, split into sittings at each run, and words of prose per chapter."""
from tools import guide
from tools import load
from tools.harness import catalogue

TOY = '''# 1. Type a piece, run it

```{.python include="code/ex02_jobs.py" pyobject="make_job"}
```

```console
$ python3 ex02_jobs.py
```

# 2. Type the rest

Four words of prose.

```{.python include="code/ex02_jobs.py"}
```

```{.python include="code/ex02_jobs.py" pyobject="make_job"}
```
'''


def test_lines_shown_twice_are_typed_once_and_a_run_ends_a_sitting():
    piece = guide.find_object(catalogue.CODE / "ex02_jobs.py", "make_job", 1)
    piece_lines = piece[1] - piece[0] + 1
    whole = len((catalogue.CODE / "ex02_jobs.py").read_text().splitlines())
    assert 1 < piece_lines < whole
    assert load.sittings(guide.blocks(TOY)) == {"ex02_jobs.py": [piece_lines, whole - piece_lines]}


def test_words_are_counted_outside_fenced_blocks():
    assert load.words_per_chapter(TOY) == {"1. Type a piece, run it": 0, "2. Type the rest": 4}
