// The module worker that runs Python: Pyodide from this site, then the
// course's simulation code from course.zip. It answers {id, type} messages:
// "boot" once, then "call" with a JSON request for sims.api.call.

import { loadPyodide } from "../../pyodide/pyodide.mjs";

let api = null;

async function boot() {
  const pyodide = await loadPyodide({
    indexURL: new URL("../../pyodide/", import.meta.url).href,
  });
  const response = await fetch(new URL("./course.zip", import.meta.url));
  if (!response.ok) {
    throw new Error(`course.zip could not be fetched (HTTP ${response.status})`);
  }
  pyodide.unpackArchive(await response.arrayBuffer(), "zip", { extractDir: "/course" });
  // course.zip is laid out as the repository: tools/sims/ and code/.
  pyodide.runPython("import sys; sys.path.insert(0, '/course/tools')");
  api = pyodide.pyimport("sims.api");
}

self.addEventListener("message", async (event) => {
  const { id, type, request } = event.data;
  try {
    if (type === "boot") {
      await boot();
      self.postMessage({ id, ok: true, result: null });
    } else if (type === "call") {
      self.postMessage({ id, ok: true, result: api.call(request) });
    } else {
      throw new Error(`unknown message type ${type}`);
    }
  } catch (error) {
    self.postMessage({ id, ok: false, error: String(error && error.message || error) });
  }
});
