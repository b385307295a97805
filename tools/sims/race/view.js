// The race stepper (Chapter 4): two workers run Exercise 5's claim one
// statement at a time, in the order the reader chooses, on a real SQLite
// table. "Try every interleaving" runs all orders and counts duplicates.

import { el, player, scrolling, sideways, taskList } from "../dom.js";

const STEP_MS = 700;                  // one statement per step when playing

// A small seeded random generator (mulberry32): the same seed plays the
// same order of steps, so a run the reader found can be found again.
function seeded(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

let views = 0;                        // a page may hold more than one

export default function race(body, { act, announce }) {
  views += 1;
  const group = `race-claim-${views}`; // one group: one tab stop, arrow keys choose
  let claim = "naive";
  let seed = 1;
  let random = seeded(seed);
  let finished = [false, false];
  const choices = ["naive", "atomic"].map((value) => el("label", {},
    el("input", { type: "radio", name: group,
      value, checked: value === claim, onchange: () => choose(value) }),
    ` the ${value} claim`));
  const stepButtons = [0, 1].map((worker) => el("button",
    { type: "button", onclick: () => act("step", worker) }, `Step worker ${worker + 1}`));
  const play = el("button", { type: "button" }, "Play a random order");
  const speed = el("select", { "aria-label": "Speed" },
    el("option", { value: "1" }, "1×"), el("option", { value: "3" }, "3×"));
  const seedShown = el("span", { class: "sim-clock" });
  const code = el("pre", { class: "sim-code", tabindex: "0", "aria-label": "The code" });
  const table = el("tbody");
  const outbox = el("ol", { class: "sim-outbox" });
  const result = el("p", { class: "sim-result" });
  const everyOrder = el("p", { class: "sim-every" });
  const tasks = el("div");
  body.append(
    el("div", { class: "sim-controls" },
      el("fieldset", {}, el("legend", {}, "Both workers use"), ...choices),
      ...stepButtons, play, el("label", {}, "Speed ", speed),
      el("button", { type: "button", onclick: () => restart(seed + 1) }, "Another order"),
      el("button", { type: "button", onclick: () => restart(seed) }, "Reset"),
      el("button", { type: "button", onclick: tryEveryOrder }, "Try every interleaving"),
      seedShown),
    el("div", { class: "sim-panels" },
      el("section", { class: "wide" },
        el("h3", {}, "Where each worker is: W1 and W2 mark the line each runs next"),
        sideways(code, "code"), code),
      el("section", {}, el("h3", {}, "The jobs table"),
        scrolling(el("table", {}, el("thead", {}, el("tr", {},
          el("th", {}, "Job"), el("th", {}, "Status"), el("th", {}, "Worker"))), table))),
      el("section", {}, el("h3", {}, "Outbox"), outbox, result)),
    everyOrder,
    el("section", {}, el("h3", {}, "Try to"), tasks));

  const playing = player(play, () => STEP_MS / Number(speed.value), () => {
    const able = [0, 1].filter((worker) => !finished[worker]);
    act("step", able[Math.floor(random() * able.length)]);
  }, () => finished.every(Boolean));

  function choose(value) {
    claim = value;
    restart(seed);
  }

  // Back to the start; playing then replays the order this seed gives.
  function restart(newSeed) {
    playing.stop();
    seed = newSeed;
    random = seeded(seed);
    act("reset", claim);
  }


  async function tryEveryOrder() {
    const counts = [];
    for (const each of ["naive", "atomic"]) {
      const answer = await act("every_interleaving", each);
      if (answer) {
        counts.push(`the ${each} claim: ${answer.duplicates} of ${answer.schedules} orders ` +
          "send an email twice");
      }
    }
    everyOrder.textContent = `Every interleaving, one job: ${counts.join("; ")}.`;
    announce(everyOrder.textContent);
  }

  function draw(state) {
    const marks = state.code.map(() => []);
    state.workers.forEach((worker, index) => {
      if (worker.next_line !== null && worker.next_line !== undefined) {
        marks[worker.next_line - 1].push(`W${index + 1}`);
      }
    });
    code.replaceChildren(...state.code.map((line, index) => el("span",
      { class: marks[index].length ? "line next" : "line" },
      `${marks[index].join(",").padEnd(6)}${line}\n`)));
    seedShown.textContent = `seed ${seed}`;
    finished = state.workers.map((worker) => worker.done);
    stepButtons.forEach((button, index) => {
      const worker = state.workers[index];
      button.disabled = worker.done;
      button.title = worker.last || "";
    });
    table.replaceChildren(...state.table.map((row) => el("tr", {},
      el("th", { scope: "row" }, String(row.id)), el("td", {}, row.status),
      el("td", {}, row.worker || ""))));
    outbox.replaceChildren(...state.outbox.map((email) => el("li",
      { class: email.duplicate ? "duplicate" : "" },
      `job ${email.job}, sent by ${email.worker}`,
      email.duplicate ? el("strong", {}, " ⚠ duplicate") : null)));
    result.textContent = state.result;
    tasks.replaceChildren(taskList(state.tasks));
    const last = state.workers.map((worker, index) => worker.last &&
      `Worker ${index + 1}: ${worker.last}`).filter(Boolean);
    announce([...last, state.result].join(". "));
  }

  return { draw, options: { claim: "naive" } };
}
