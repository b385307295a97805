// Writes the simulations' trimmed, precompiled standard library (see
// tools/sims/stdlib.py) with Pyodide's own Python, under Node:
//
//     node tools/stdlib.mjs OUT.zip
//
// The build runs it. It reads Pyodide from node_modules/ and the course
// from this repository, and prints what it kept.

import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { loadPyodide } from "../node_modules/pyodide/pyodide.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const out = resolve(process.argv[2]);
const pyodide = await loadPyodide({ indexURL: `${root}/node_modules/pyodide/` });
pyodide.FS.mkdirTree("/course");
pyodide.mountNodeFS("/course", root);
pyodide.FS.mkdirTree("/out");
pyodide.mountNodeFS("/out", dirname(out));
pyodide.globals.set("out", `/out/${out.split("/").pop()}`);
console.log(pyodide.runPython(`
import sys
sys.path.insert(0, "/course")
from tools.sims import stdlib
stdlib.make(stdlib.TRIMMED, out, "/course")
`));
