// The simulations: each `.sim-mount[data-sim]` the build leaves in a page
// becomes a picture and a start button. The picture is the engine's first
// state, which the build computed (first.json), drawn as the reader nears
// it but not yet to be used (inert). Starting boots Python (once per page) and
// makes the same engine, which then draws the simulation after every
// action. Everything runs in the reader's browser. Python starts loading
// only when the reader shows they mean to start: a pointer over Start, or
// the focus on it (on Start itself when the browser saves data). Once the
// site's service worker has kept Python, at the reader's first Start,
// nothing is downloaded again: then Python wakes, and each simulation is
// made, as it comes near (within a screen), so that Start has nothing left
// to wait for.

import { call, kept, lives, ready, stop, watchDownload } from "./runtime.js";
import { el, taskList, whenWidthChanges } from "./dom.js";

const SLOW_CALL_MS = 15000;    // an answer later than this means Python is stuck
// What starting Python downloads, in bytes, as the build measured it.
const DOWNLOAD_BYTES = Number(document.querySelector('meta[name="sims-download"]')?.content);
const megabytes = (bytes) => `${(bytes / 1e6).toFixed(1)} MB`;
const DOWNLOAD = megabytes(DOWNLOAD_BYTES);

// Where tools/blocks.lua leaves each simulation: <div class="sim-mount" data-sim=NAME>.
const MOUNTS = ".sim-mount[data-sim]";
// A reader whose browser asks to save data downloads nothing before Start.
const SAVING_DATA = Boolean(navigator.connection?.saveData);
// Whether Python was kept at an earlier Start (runtime.js), asked once a page.
const KEPT = kept().catch(() => false);

// A simulation's folder is its name with underscores for hyphens
// ("killable-queue" is killable_queue/), as tools/sims/__init__.py has it.
const folderOf = (name) => name.replaceAll("-", "_");

// A simulation's view is the default export of view.js in its folder, its
// styles are view.css beside it, and its first state first.json (written
// by the build: tools/sims/package.py). All three are fetched as the page
// loads, and the first picture waits for them all: a view measures what it
// draws. {makeView, first}: first.options are what the engine is made with.
function loadView(name) {
  const folder = new URL(`./${folderOf(name)}/`, import.meta.url);
  const loading = Promise.all([import(new URL("view.js", folder).href),
    styles(new URL("view.css", folder).href), firstState(new URL("first.json", folder))])
    .then(([module, , first]) => ({ makeView: module.default, first }));
  loading.catch(() => {});     // a failure is reported when the reader starts it
  return loading;
}

async function firstState(url) {
  const response = await fetch(url);
  if (!response.ok) {
    throw new Error(`${url.pathname} did not load (${response.status})`);
  }
  return response.json();
}

const sheets = new Map();      // each stylesheet once, however many of its sims a page has
function styles(href) {
  if (!sheets.has(href)) {
    sheets.set(href, new Promise((loaded, failed) => {
      document.head.append(el("link", { rel: "stylesheet", href, onload: loaded,
        onerror: () => failed(new Error(`${href} did not load`)) }));
    }));
  }
  return sheets.get(href);
}

function mount(element, number) {
  const name = element.dataset.sim;
  const sim = loadView(name);
  const instance = `${name}-${number}`;
  const status = el("p", { class: "sim-status", role: "status" });
  const announcer = el("p", { class: "visually-hidden", "aria-live": "polite" });
  const body = el("div", { class: "sim-body", hidden: true });
  const begun = SAVING_DATA ? "when you press Start" : "as you point at Start or tab to it";
  const size = el("span", { class: "sim-size", id: `${instance}-download` },
    `It runs Python in your browser: a download of ${DOWNLOAD}, begun ${begun}.`);
  const start = el("button", { type: "button", class: "sim-start",
    "aria-describedby": size.id }, "Start the simulation");
  if (!SAVING_DATA) {
    // Most of a boot is the download: begun on intent, it is mostly over by the click.
    const warmUp = () => ready().catch(() => {});   // Start tries again, and says what failed
    start.addEventListener("pointerenter", warmUp, { once: true });
    start.addEventListener("focus", warmUp, { once: true });
  }
  KEPT.then((yes) => yes && (size.textContent =
    "It runs Python in your browser, kept since your first Start: it wakes as you " +
    "near it, with nothing to download."));
  element.append(el("div", { class: "sim-bar" }, start, size, status), body, announcer);
  element.dataset.state = "idle";
  element.dataset.busy = "false";
  let view = null;             // what draws the states, in body
  // The tasks the engine reports, ticked when earned: the view places them.
  const taskBox = el("div");
  const tasks = el("section", {}, el("h3", {}, "Try to"), taskBox);
  let drawn = null;            // the state drawn last, to draw again at a new width
  let early = null;            // the engine made before Start: {life, answer}
  // Calls go to Python one at a time, in the order they were made: a click
  // made while another call is in flight waits its turn instead of being lost.
  // data-busy says whether any is still waiting or in flight.
  let queue = Promise.resolve();
  let waiting = 0;

  function setState(state, message) {
    element.dataset.state = state;
    status.textContent = message;
  }

  // The status line says what to try first, and acknowledges each task as it
  // is done, with the next one: said (and read out) only when that changes.
  let done = null;             // the ids of the tasks done when last said
  // A full stop, unless a task that is a question already ends the sentence.
  const ended = (words) => (/[.?!]$/.test(words) ? words : `${words}.`);
  function guide(tasks) {
    const now = tasks.filter((task) => task.done).map((task) => task.id);
    if (done !== null && now.join() === done.join()) {
      return;
    }
    const finished = tasks.filter((task) => task.done && !(done || []).includes(task.id));
    const next = tasks.find((task) => !task.done);
    const then = next ? ended(`${finished.length ? "Next" : "Try first"}: ${next.text}`)
      : "That was the last task.";
    done = now;
    setState("ready", finished.length
      ? `${ended(`Done: ${finished.map((task) => task.text).join("; ")}`)} ${then}` : then);
  }

  // The text beside the mount, for readers without scripts.
  const fallbacks = () => [...element.parentElement.children].filter((each) => each !== element);

  // A view made afresh in body, its pictures redrawn to fit each new width.
  function makeView(make) {
    body.replaceChildren();
    const made = make(body, { act, announce, tasks });
    view = made;
    drawn = null;
    if (made.resized) {
      const { box, redraw } = made.resized;
      whenWidthChanges(box, () => drawn && view === made && redraw(drawn));
    }
  }

  // `newest`: no call waits behind this state's, so it is what the controls
  // say now; an older one may not be, and a view leaves its controls alone.
  function paint(state) {
    const focused = body.contains(document.activeElement) ? document.activeElement : null;
    drawn = state;
    view.draw(state, { newest: waiting <= 1 });
    if (focused?.disabled) {
      keepFocus(focused);
    }
    if (state.tasks) {
      taskBox.replaceChildren(taskList(state.tasks));
    }
  }

  function draw(state) {
    paint(state);
    if (state.tasks) {
      guide(state.tasks);
    }
  }

  // The first picture, drawn once the view and the first state are here
  // and the mount comes within a screen of the window: the system as Start
  // will make it, to be seen but not yet used (inert). If either fails to
  // load, nothing is drawn, and Start says why.
  whenNear(element, () => sim.then(({ makeView: make, first }) => {
    if (element.dataset.state !== "idle") {
      return;                  // Start was quicker, and draws for itself
    }
    makeView(make);
    body.inert = true;
    body.hidden = false;       // shown before drawn: a view measures its boxes
    paint(first.state);
    element.dataset.picture = "first";
    // The paragraph written for readers without scripts says what the
    // picture shows: now only read out, since the picture is not.
    for (const fallback of fallbacks()) {
      fallback.classList.add("visually-hidden");
    }
    KEPT.then((yes) => {
      if (yes && element.dataset.state === "idle") {
        early = makeEarly(first);
        early.catch(() => {});   // Start makes it again, and says what failed
      }
    });
  }, () => {}));

  // This simulation's engine, made as its first picture shows it.
  const makeEngine = (first) => call({ sim: name, instance, method: "new", args: [first.options] });

  // Good only while the Python it was made in runs (runtime.js: lives).
  async function makeEarly(first) {
    const life = lives;
    const answer = await makeEngine(first);
    if (answer.ok && element.dataset.state === "idle") {
      size.textContent = "Python, kept since your first Start, is ready.";
    }
    return { life, answer };
  }
  // A click on that picture, whose controls do not work yet, starts it.
  element.addEventListener("click", (event) => {
    if (event.target === element && body.inert && !start.hidden) {
      start.click();
    }
  });

  // One call to this simulation's engine; the view draws the state it returns.
  function act(method, ...args) {
    waiting += 1;
    element.dataset.busy = "true";
    const turn = queue.then(() => send(method, args)).finally(() => {
      waiting -= 1;
      element.dataset.busy = String(waiting > 0);
    });
    queue = turn;
    return turn;
  }

  // One call, when its turn comes; null if it did not work (and never throws,
  // so the calls queued behind it still run).
  async function send(method, args) {
    const slow = setTimeout(() => stuck(), SLOW_CALL_MS);
    try {
      const answer = await call({ sim: name, instance, method, args });
      if (!answer.ok) {
        setState("ready", `That did not work: ${answer.error}`);
        return null;
      }
      if (answer.state) {
        draw(answer.state);
      }
      return answer.result;
    } catch (error) {
      failed(error);
      return null;
    } finally {
      clearTimeout(slow);
    }
  }

  // A control that the state just disabled under the reader's focus (a
  // worker with no steps left) hands it to the next control that works,
  // or the one before: it is not dropped to the top of the page.
  function keepFocus(lost) {
    const controls = [...body.querySelectorAll("button, input, select")];
    const works = (control) => !control.disabled && control.getClientRects().length > 0;
    const at = controls.indexOf(lost);
    (controls.slice(at + 1).find(works) || controls.slice(0, at).reverse().find(works))?.focus();
  }

  // Nothing is read out of the first picture: the page has just loaded.
  function announce(text) {
    if (!body.inert) {
      announcer.textContent = text;
    }
  }

  function failed(error) {
    setState("error", `The simulation stopped: ${error.message}.`);
    start.textContent = "Start again";
    start.hidden = false;
    body.hidden = true;
    body.inert = false;
    delete element.dataset.picture;   // the first picture is gone with it,
    for (const fallback of fallbacks()) {
      fallback.classList.remove("visually-hidden");   // so its words are shown again
    }
    view = null;               // Start again makes a new one
  }

  function stuck() {
    stop();                   // the only way to stop Python that does not answer
    failed(new Error("Python did not answer, so it was stopped"));
  }

  start.addEventListener("click", async () => {
    start.hidden = true;
    size.hidden = true;
    const made = early?.catch(() => null);
    early = null;
    setState("loading", made ? "Starting Python, kept since your first Start…"
      : `Starting Python in your browser (${DOWNLOAD})…`);
    const progressShown = made ? () => {} : showProgress(status);
    try {
      const { makeView: make, first } = await sim;
      if (!view) {
        makeView(make);        // no first picture to bring to life
      }
      const before = await made;
      const answer = before?.answer.ok && before.life === lives ? before.answer
        : await makeEngine(first);
      if (!answer.ok) {
        throw new Error(answer.error);
      }
      body.inert = false;
      body.hidden = false;
      delete element.dataset.picture;
      setState("ready", "Ready.");
      done = null;             // a new engine: its first task comes first
      draw(answer.state);
      for (const fallback of fallbacks()) {
        fallback.hidden = true;
      }
      // The Start button is gone: the focus goes to the first control, not
      // back to the top of the page.
      body.querySelector("button, input, select")?.focus();
    } catch (error) {
      failed(error);
    } finally {
      progressShown();
    }
  });
}

// Drawing a first picture takes the main thread 15 to 70 ms (four times that
// on a mid-range phone): a page that drew all of its simulations as it
// loaded would stall for as long. Each is drawn as its mount comes within a
// screen of the window instead, before the reader gets there.
function whenNear(element, then) {
  const watching = new IntersectionObserver((entries) => {
    if (entries.some((entry) => entry.isIntersecting)) {
      watching.disconnect();
      then();
    }
  }, { rootMargin: "100% 0px" });
  watching.observe(element);
}

// The download so far as a bar after `status`, and in megabytes and seconds
// waited for the eyes only: a status read out every second would drown
// whatever else a screen reader says (the bar can be asked for its value).
// Returns what takes them away.
function showProgress(status) {
  const began = performance.now();
  const bar = el("progress", { max: String(DOWNLOAD_BYTES), value: "0",
    "aria-label": "Python downloaded" });
  const sofar = el("span", { "aria-hidden": "true" });
  const waited = el("span", { class: "sim-waited" }, bar, sofar);
  status.after(waited);
  let bytes = 0;
  const show = () => {
    bar.value = Math.min(bytes, DOWNLOAD_BYTES);
    sofar.textContent = ` ${(bytes / 1e6).toFixed(1)} of ${DOWNLOAD} · ` +
      `${Math.round((performance.now() - began) / 1000)} s`;
  };
  const unwatch = watchDownload((received) => { bytes = received; show(); });
  const counting = setInterval(show, 1000);
  return () => {
    clearInterval(counting);
    unwatch();
    waited.remove();
  };
}

document.querySelectorAll(MOUNTS).forEach(mount);
