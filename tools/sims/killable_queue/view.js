// The killable queue (Chapters 4 and 5): a producer, the jobs table and three
// workers, all tinyq, on a virtual clock. The reader adds jobs, kills and
// restarts workers, sets the lease, and plays or steps time.

import { el, player, scrolling, taskList } from "../dom.js";

const TICK_MS = 200;                 // how often playing moves the clock
const ANNOUNCED = new Set(["killed", "expired", "takeover", "duplicate", "lost"]);
const reducedMotion = window.matchMedia("(prefers-reduced-motion: reduce)");

function seconds(value) {
  return value === null || value === undefined ? "" : `${value.toFixed(1)} s`;
}

export default function killableQueue(body, { act, announce }) {
  let lastEvent = 0;               // the number (n) of the last event read
  const speed = el("select", { "aria-label": "Speed" },
    el("option", { value: "1" }, "1×"), el("option", { value: "2" }, "2×"),
    el("option", { value: "5" }, "5×"));
  // A changed lease applies at once, to claims from then on.
  const lease = el("input", { type: "number", min: "1", max: "30", step: "1", value: "5",
    id: "kq-lease", inputmode: "numeric", onchange: setLease });
  const play = el("button", { type: "button" }, "Play");
  // With reduced motion, the tables change less often: bigger steps.
  const every = () => (reducedMotion.matches ? TICK_MS * 5 : TICK_MS);
  const playing = player(play, every,
    () => act("tick", (every() / 1000) * Number(speed.value)));
  const clock = el("span", { class: "sim-clock" });
  const controls = el("div", { class: "sim-controls" },
    el("button", { type: "button", onclick: () => act("enqueue", 1) }, "Add a job"),
    play,
    el("button", { type: "button", onclick: () => act("step") }, "Step to the next event"),
    el("label", {}, "Speed ", speed),
    el("label", { for: "kq-lease" }, "Lease (s) "), lease,
    el("button", { type: "button", onclick: reset }, "Reset"),
    clock);
  const workers = el("tbody");
  const jobs = el("tbody");
  const outbox = el("ol", { class: "sim-outbox" });
  const events = el("ol", { class: "sim-events" });
  const tasks = el("div");
  body.append(controls,
    el("div", { class: "sim-panels" },
      el("section", {}, el("h3", {}, "Workers"),
        scrolling(el("table", {}, el("thead", {}, el("tr", {},
          el("th", {}, "Worker"), el("th", {}, "Doing"), el("th", {}, "Job"),
          el("th", {}, "Time left"), el("th", {}, el("span", { class: "visually-hidden" },
            "Action")))), workers))),
      el("section", {}, el("h3", {}, "The jobs table"),
        scrolling(el("table", {}, el("thead", {}, el("tr", {},
          el("th", {}, "Job"), el("th", {}, "Email to"), el("th", {}, "Status"),
          el("th", {}, "Attempts"), el("th", {}, "Lease left"))), jobs))),
      el("section", {}, el("h3", {}, "Outbox"), outbox),
      el("section", {}, el("h3", {}, "What happened"), events)),
    el("section", {}, el("h3", {}, "Try to"), tasks));

  function setLease() {
    if (lease.reportValidity()) {      // else the browser says what the box takes
      act("set_lease", Number(lease.value));
    }
  }

  function reset() {
    if (!lease.reportValidity()) {
      return;
    }
    playing.stop();
    lastEvent = 0;
    act("new", { lease: Number(lease.value) });
  }

  // A worker's row is made once and then updated, never replaced: a button
  // replaced between a press and its release loses the click, and the focus.
  const rows = [];
  function workerRow(worker) {
    if (!rows[worker.index]) {
      const cells = [el("th", { scope: "row" }), el("td"), el("td"), el("td")];
      const button = el("button", { type: "button",
        onclick: () => act(button.dataset.action, worker.index) });
      rows[worker.index] = { cells, button, row: el("tr", {}, cells, el("td", {}, button)) };
    }
    const { cells, button, row } = rows[worker.index];
    const texts = [worker.name, worker.alive ? worker.phase : "dead ✗",
      worker.job === null ? "" : `job ${worker.job}`, seconds(worker.seconds_left)];
    texts.forEach((text, index) => { cells[index].textContent = text; });
    const action = worker.alive ? "Kill" : "Restart";
    button.dataset.action = action.toLowerCase();
    button.textContent = action;
    button.setAttribute("aria-label", `${action} ${worker.name}`);
    return row;
  }

  function draw(state) {
    clock.textContent = `time ${seconds(state.time)} · lease ${state.lease} s · no dice`;
    const shown = state.workers.map(workerRow);
    if (shown.length !== workers.children.length
        || shown.some((row, index) => workers.children[index] !== row)) {
      workers.replaceChildren(...shown);
    }
    jobs.replaceChildren(...state.jobs.map((job) => el("tr", {},
      el("th", { scope: "row" }, String(job.id)), el("td", {}, job.address),
      el("td", {}, job.status), el("td", {}, String(job.attempts)),
      el("td", {}, job.status === "running" ? seconds(job.lease_left) : ""))));
    outbox.replaceChildren(...state.outbox.map((email) => el("li",
      { class: email.duplicate ? "duplicate" : "" },
      `job ${email.job} to ${email.address}, sent by ${email.worker}`,
      email.duplicate ? el("strong", {}, " ⚠ duplicate") : null)));
    events.replaceChildren(...state.events.slice(-8).map((event) =>
      el("li", { class: `event-${event.kind}` }, event.text)));
    tasks.replaceChildren(taskList(state.tasks));
    const news = state.events.filter((event) => event.n > lastEvent && ANNOUNCED.has(event.kind))
      .map((event) => event.text);
    if (news.length) {
      announce(news.join(". "));
    }
    lastEvent = state.events.length ? state.events[state.events.length - 1].n : lastEvent;
  }

  return { draw, options: { lease: 5 } };
}
