// One Python for the whole page, started the first time a reader starts a
// simulation: Pyodide in a module worker, so the page never freezes while it
// boots. Requests and answers carry ids; a boot that takes too long (Pyodide
// can hang for good when its wasm fails to load) ends in an error, not a wait.

const BOOT_TIMEOUT_MS = 60000;

let worker = null;
let booting = null;
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
  worker = null;
  booting = null;
  received = 0;
  failAll("Python was stopped");
}
