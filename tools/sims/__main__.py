"""Run a simulation as a text program, from the course's folder:

    python3 -m tools.sims race --jobs 3
    python3 -m tools.sims payment --seed 4 --keys stable

NAME is a folder of tools/sims/ (hyphens or underscores); what follows it
goes to that engine's main(). Without a name, list them.
"""
import importlib
import sys

from . import folders


def main(argv):
    sims = folders()
    name = argv[0].replace("_", "-") if argv else None
    if name not in sims:
        print(f"usage: python3 -m tools.sims NAME [options]; NAME is one of: "
              f"{', '.join(sims)}", file=sys.stderr)
        return 2
    engine = importlib.import_module(f"{__package__}.{sims[name].name}.engine")
    engine.main(argv[1:])
    return 0


sys.exit(main(sys.argv[1:]))
