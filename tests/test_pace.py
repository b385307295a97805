"""Every transcript session in which a person types more than once, run again
with the pauses a person takes before each command and ^C (sessions.PAUSE_*):
once as a quick person (pace 1) and once as a slow one (pace 3, three times as
long). The story must still come out as the guide tells it. Not collected when
grading a learner's folder (--work): these check the guide's stories, which
code/ tells; the learner's files are checked at the machine's pace."""

import pytest
from sybil import Document

from tools.harness import catalogue, sessions

GUIDE = catalogue.ROOT / "guide.md"
PACES = {"quick person": 1, "slow person": 3}


def paced_sessions():
    """A param (the session's fence lines) for each paced session of the guide."""
    document = Document(GUIDE.read_text(encoding="utf-8"), GUIDE.name)
    firsts = [region.parsed for region in sessions.parse_console_blocks(document)
              if region.parsed is region.parsed.session_blocks[0]]
    return [pytest.param([block.line for block in first.session_blocks],
                         id=f"guide.md:{first.line}",
                         marks=[pytest.mark.exercise(catalogue.exercise_of(first))]
                         if catalogue.exercise_of(first) else [])
            for first in firsts if sessions.paced(first.session_blocks)]


@pytest.mark.parametrize("pace", PACES.values(), ids=PACES.keys())
@pytest.mark.parametrize("lines", paced_sessions())
def test_a_person_at_the_keyboard_sees_what_the_guide_shows(lines, pace, source_folder):
    """The session prints what the guide shows, run with a person's pauses."""
    results = sessions.check_text(GUIDE.read_text(encoding="utf-8"), source_folder,
                                 only=set(lines), pace=pace)
    problems = [message for message in results.values() if message]
    if problems:           # each begins "guide.md:LINE: "
        pytest.fail("\n".join(message.replace(": ", f": at pace {pace}, ", 1)
                              for message in problems), pytrace=False)
