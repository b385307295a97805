// The simulations: each `.sim-mount[data-sim]` the build leaves in a page
// becomes a start button. Starting one boots Python (once per page) and
// draws the simulation from the state its Python engine reports after
// every action. Everything runs in the reader's browser.

import { call, stop } from "./runtime.js";
import { killableQueue } from "./killable-queue.js";
import { race } from "./race.js";
import { crashTiming } from "./crash-timing.js";
import { payment } from "./payment.js";
import { o7 } from "./o7.js";
import { el } from "./dom.js";

const SIMS = { "killable-queue": killableQueue, race, "crash-timing": crashTiming, payment, o7 };
const SLOW_CALL_MS = 15000;    // an answer later than this means Python is stuck

function mount(element, number) {
  const name = element.dataset.sim;
  const sim = SIMS[name];
  if (!sim) {
    return;
  }
  const instance = `${name}-${number}`;
  const status = el("p", { class: "sim-status", role: "status" });
  const announcer = el("p", { class: "visually-hidden", "aria-live": "polite" });
  const body = el("div", { class: "sim-body", hidden: true });
  const start = el("button", { type: "button", class: "sim-start" }, `Start the simulation`);
  element.append(el("div", { class: "sim-bar" }, start, status), body, announcer);
  element.dataset.state = "idle";
  let view = null;
  // Calls go to Python one at a time, in the order they were made: a click
  // made while another call is in flight waits its turn instead of being lost.
  // data-busy says whether any is still waiting or in flight.
  let queue = Promise.resolve();
  let waiting = 0;

  function setState(state, message) {
    element.dataset.state = state;
    status.textContent = message;
  }

  // One call to this simulation's engine; the view draws the state it returns.
  function act(method, ...args) {
    return ask(name, instance, method, args, (state) => view.draw(state));
  }

  function ask(sim, id, method, args, draw) {
    waiting += 1;
    element.dataset.busy = "true";
    const turn = queue.then(() => send(sim, id, method, args, draw)).finally(() => {
      waiting -= 1;
      element.dataset.busy = String(waiting > 0);
    });
    queue = turn;
    return turn;
  }

  // One call, when its turn comes; null if it did not work (and never throws,
  // so the calls queued behind it still run).
  async function send(sim, id, method, args, draw) {
    const slow = setTimeout(() => stuck(), SLOW_CALL_MS);
    try {
      const answer = await call({ sim, instance: id, method, args });
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

  function announce(text) {
    announcer.textContent = text;
  }

  function failed(error) {
    setState("error", `The simulation stopped: ${error.message}.`);
    start.textContent = "Start again";
    start.hidden = false;
    body.hidden = true;
  }

  function stuck() {
    stop();                   // the only way to stop Python that does not answer
    failed(new Error("Python did not answer, so it was stopped"));
  }

  start.addEventListener("click", async () => {
    start.hidden = true;
    setState("loading", "Starting Python in your browser (a few seconds the first time)…");
    body.replaceChildren();
    view = sim(body, { act, announce });
    try {
      const answer = await call({ sim: name, instance, method: "new", args: [view.options || {}] });
      if (!answer.ok) {
        throw new Error(answer.error);
      }
      body.hidden = false;
      view.draw(answer.state);
      setState("ready", "Ready.");
    } catch (error) {
      failed(error);
    }
  });
}

document.querySelectorAll(".sim-mount[data-sim]").forEach(mount);
