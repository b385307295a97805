// One Python for the whole page, started the first time a reader starts a
// simulation: Pyodide in a module worker, so the page never freezes while it
// boots. Requests and answers carry ids; a boot that takes too long (Pyodide
// can hang for good when its wasm fails to load) ends in an error, not a wait.

const BOOT_TIMEOUT_MS = 60000;

let worker = null;
let booting = null;
// Which Python this page runs: stop() ends one, and with it every engine
// made in it, though the next starts only when a call needs it.
export let lives = 0;
let nextId = 1;
const pending = new Map();   // request id -> {resolve, reject}
let received = 0;            // bytes of Python downloaded so far
const downloading = new Set();   // who wants to hear of each new byte count

function failAll(message) {
  for (const request of pending.values()) {
    request.reject(new Error(message));
  }
  pending.clear();
}

function start() {
  worker = new Worker(new URL("./worker.mjs", import.meta.url), { type: "module" });
  worker.addEventListener("message", (event) => {
    if (event.data.type === "progress") {
      received = event.data.received;
      downloading.forEach((listener) => listener(received));
      return;
    }
    const { id, ok, result, error } = event.data;
    const request = pending.get(id);
    if (!request) {
      return;
    }
    pending.delete(id);
    if (ok) {
      request.resolve(result);
    } else {
      request.reject(new Error(error));
    }
  });
  worker.addEventListener("error", (event) => {
    failAll(event.message || "the Python worker could not start");
  });
}

function send(message, timeoutMs) {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    worker.postMessage({ id, ...message });
    if (timeoutMs) {
      setTimeout(() => {
        if (pending.delete(id)) {
          reject(new Error(`Python did not start within ${timeoutMs / 1000} s`));
        }
      }, timeoutMs);
    }
  });
}

// Resolves once Python is ready; starts it if nobody has yet.
export function ready() {
  if (!booting) {
    start();
    booting = send({ type: "boot" }, BOOT_TIMEOUT_MS).catch((error) => {
      stop();
      throw error;
    });
  }
  return booting;
}

// What a boot fetches, as worker.mjs and Pyodide ask for them, from this folder.
const BOOT_FILES = ["../../pyodide/pyodide.mjs", "../../pyodide/pyodide.asm.mjs",
  "../../pyodide/pyodide.asm.wasm", "../../pyodide/pyodide-lock.json", "./stdlib.zip",
  "./course.zip"];

// Whether the site's service worker kept Python at an earlier Start (tools/sw.js)
// and answers for this page: then starting it downloads nothing.
export async function kept() {
  if (!navigator.serviceWorker?.controller || !self.caches) {
    return false;
  }
  const found = await Promise.all(BOOT_FILES.map((path) =>
    caches.match(new URL(path, import.meta.url).href)));
  return found.every(Boolean);
}

// Calls listener(bytes) with the bytes of Python downloaded so far, now and
// at each change, until the function it returns is called.
export function watchDownload(listener) {
  downloading.add(listener);
  listener(received);
  return () => downloading.delete(listener);
}

// One call into the simulations' Python API: {sim, instance, method, args}.
// Resolves with its answer, {ok, state, result} or {ok: false, error}.
export async function call(request) {
  await ready();
  return JSON.parse(await send({ type: "call", request: JSON.stringify(request) }));
}

// Throws the whole Python away: every simulation on the page starts afresh.
export function stop() {
  if (worker) {
    worker.terminate();
  }
  lives += 1;
  worker = null;
  booting = null;
  received = 0;
  failAll("Python was stopped");
}
