"""The transcript harness: it runs the guide's console blocks against the
exercise files (code/, or a learner's folder) and says which exercises pass.

    sandbox.py    run a command as a reader would: a copy, limits, process groups
    compare.py    whether the output is what the guide shows
    sessions.py   console blocks as sessions, terminals and ^C; the Sybil parser
    update.py     the update mode: blocks whose output changed, rewritten in guide.md
    catalogue.py  the exercises, declared once; which a block checks, where each is taught
    results.py    the verdict words, and the results file grading reads
    plugin.py     pytest wiring: Sybil, --work, --update-transcripts, the summary
    timewarp/     the time warp every command runs with (sitecustomize.py)
"""
