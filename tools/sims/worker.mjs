// The module worker that runs Python: Pyodide from this site, then the
// course's simulation code from course.zip. It answers {id, type} messages:
// "boot" once, then "call" with a JSON request for sims.api.call.

let api = null;

// Bytes of Python received so far, told to the page as they arrive so that
// the reader sees the download move. Pyodide fetches its files with fetch();
// each answer's body is counted as it streams through. (Its two .mjs files
// come by import(), and are counted when each has come.)
let received = 0;
const fetchUncounted = self.fetch.bind(self);

function tell(bytes) {
  received += bytes;
  self.postMessage({ type: "progress", received });
}

self.fetch = async (...args) => {
  const response = await fetchUncounted(...args);
  if (!response.ok || !response.body) {
    return response;
  }
  const counted = response.body.pipeThrough(new TransformStream({
    transform(chunk, stream) {
      tell(chunk.byteLength);
      stream.enqueue(chunk);
    },
  }));
  return new Response(counted, { status: response.status, statusText: response.statusText,
    headers: response.headers });
};

new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    if (entry.name.includes("/pyodide/") && entry.name.endsWith(".mjs")) {
      tell(entry.decodedBodySize);
    }
  }
}).observe({ type: "resource", buffered: true });

async function boot() {
  // Imported here, not at the top, so that its bytes are counted too.
  const { loadPyodide } = await import("../../pyodide/pyodide.mjs");
  const pyodide = await loadPyodide({
    indexURL: new URL("../../pyodide/", import.meta.url).href,
    // The standard library trimmed to what the simulations import, compiled
    // (tools/sims/stdlib.py): less to fetch, nothing to compile.
    stdLibURL: new URL("./stdlib.zip", import.meta.url).href,
  });
  const response = await fetch(new URL("./course.zip", import.meta.url));
  if (!response.ok) {
    throw new Error(`course.zip could not be fetched (HTTP ${response.status})`);
  }
  pyodide.unpackArchive(await response.arrayBuffer(), "zip", { extractDir: "/course" });
  // course.zip is laid out as the repository: tools/sims/ and code/. The
  // package `tools` is found from /course, as .venv/ finds it on a machine.
  pyodide.runPython("import sys; sys.path.insert(0, '/course')");
  pyodide.pyimport("tools.sims.stdlib").install(() => wholeLibrary(pyodide));
  api = pyodide.pyimport("tools.sims.api");
}

// Pyodide's whole standard library, for a module the trimmed one lacks:
// fetched while Python waits (an import cannot wait for a promise), which a
// worker may do. Returns where it was put.
function wholeLibrary(pyodide) {
  const request = new XMLHttpRequest();
  request.open("GET", new URL("../../pyodide/python_stdlib.zip", import.meta.url), false);
  request.responseType = "arraybuffer";
  request.send();
  if (request.status !== 200) {
    throw new Error(`the standard library could not be fetched (HTTP ${request.status})`);
  }
  const path = "/lib/python_stdlib_whole.zip";
  pyodide.FS.writeFile(path, new Uint8Array(request.response));
  return path;
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
