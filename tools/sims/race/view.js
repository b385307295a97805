// The race stepper (Chapter 4): two workers run Exercise 5's claim one
// statement at a time, in the order the reader chooses, on a real SQLite
// table. The picture is drawn in time, top to bottom: a lane for each
// worker with a mark for each step it ran, and between the lanes the jobs
// row as each step left it. A naive worker's gap, from the SELECT that found
// a job to the UPDATE that marked it, is shaded; where both workers are in
// their gaps at once the picture turns red: that is the race. Click a mark
// to go back to just after it, or a worker's dashed next step to run it.
// Above the lanes, the steps as code, one line each, with where each worker
// is. "Try every interleaving" runs all orders and counts the duplicates.

import { el, svg, player } from "../dom.js";

const STEP_MS = 700;                  // one statement per step when playing

// The picture's measures, in pixels (the SVG draws at 1:1 when it fits).
const HEAD = 30;                      // the names above the lanes
const SLOT = 40;                      // one step, top to bottom
const TIME = 30;                      // the step numbers, left of the lanes
const GAP = 8;                        // between the columns
const NARROWEST = 340;                // a narrower box scales the picture down
const WIDEST = 720;

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

// The jobs row as a step left it, in a few words.
function rowSaid([, status, worker]) {
  return worker ? `${status}: ${worker}` : status;
}

let views = 0;                        // a page may hold more than one

export default function race(body, { act, announce, tasks }) {
  views += 1;
  const group = `race-claim-${views}`; // one group: one tab stop, arrow keys choose
  let claim = "naive";
  let seed = 1;
  let random = seeded(seed);
  let finished = [false, false];
  let last = null;                    // the state last drawn
  const choices = ["naive", "atomic"].map((value) => el("label", {},
    el("input", { type: "radio", name: group,
      value, checked: value === claim, onchange: () => choose(value) }),
    ` the ${value} claim`));
  const stepButtons = [0, 1].map((worker) => el("button",
    { type: "button", onclick: () => act("step", worker) }, `Step worker ${worker + 1}`));
  const back = el("button", { type: "button", onclick: () => goBack(-1) }, "Back a step");
  const play = el("button", { type: "button" }, "Play a random order");
  const speed = el("select", { "aria-label": "Speed" },
    el("option", { value: "1" }, "1×"), el("option", { value: "3" }, "3×"));
  const seedShown = el("span", { class: "sim-clock" });
  const program = el("ol", { class: "race-program" });
  // Named and described by its own title and desc, redrawn at each step.
  const picture = svg("svg", { role: "img", "aria-labelledby": `race-title-${views}`,
    "aria-describedby": `race-desc-${views}` });
  const box = el("div", { class: "sim-picture race-picture" }, picture);
  const key = el("p", { class: "race-key" });
  const log = el("ol", { class: "race-log" });
  const outbox = el("ol", { class: "sim-outbox" });
  const result = el("p", { class: "sim-result" });
  const everyOrder = el("p", { class: "sim-every" });
  const why = el("p", { class: "race-why", hidden: true });
  const orders = svg("svg", { class: "race-orders", role: "img" });
  const ordersBox = el("div", { class: "sim-picture", hidden: true }, orders);
  body.append(
    el("div", { class: "sim-controls" },
      el("fieldset", {}, el("legend", {}, "Both workers use"), ...choices),
      ...stepButtons, back, play, el("label", {}, "Speed ", speed),
      el("button", { type: "button", onclick: () => restart(seed + 1) }, "Another order"),
      el("button", { type: "button", onclick: () => restart(seed) }, "Reset"),
      el("button", { type: "button", onclick: tryEveryOrder }, "Try every interleaving"),
      seedShown),
    el("section", { class: "race-code" },
      el("h3", {}, "Each worker's steps, one statement each"), program),
    box, key,
    el("div", { class: "sim-panels" },
      el("section", {}, el("h3", {}, "What each step did"), log),
      el("section", {}, el("h3", {}, "Outbox"), outbox, result)),
    everyOrder, ordersBox, why,
    tasks);

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

  // Back to just after step `to` of the log (-1: one step back): the engine
  // runs the same order again from the start, to that moment.
  function goBack(to) {
    if (!last) return;
    playing.stop();
    const order = last.log.map((entry) => entry.worker);
    act("replay", order.slice(0, to < 0 ? order.length + to : to + 1));
  }

  async function tryEveryOrder() {
    const answers = {};
    for (const each of ["naive", "atomic"]) {
      answers[each] = await act("every_interleaving", each);
    }
    const counts = Object.entries(answers).filter(([, answer]) => answer).map(([each, answer]) =>
      `the ${each} claim: ${answer.duplicates} of ${answer.schedules} orders send an email twice`);
    everyOrder.textContent = `Every interleaving, one job: ${counts.join("; ")}.`;
    const naive = answers.naive;
    if (naive) {
      const apart = naive.apart === naive.safe
        ? `are exactly the ones where one worker runs its whole claim, all ` +
          `${naive.claim_steps} steps from the SELECT to the UPDATE, before the other's first step`
        : `include ${naive.apart} where one worker runs its whole claim before the other's first step`;
      why.textContent = `The ${naive.safe} naive orders that send it once ${apart}. ` +
        "Counted like this, a duplicate looks almost certain, yet a real run of the naive " +
        "claim without Exercise 5's deliberate gap sends twice only now and then. The " +
        "orders are not equally likely: a real worker usually runs its few statements " +
        "one after another, in microseconds, without being paused between them, so " +
        `nearly every real run is one of those ${naive.safe}.`;
      why.hidden = false;
      drawOrders(naive);
    }
    announce(`${everyOrder.textContent} ${why.textContent}`);
  }

  // The naive claim's orders as one bar, split by what they send.
  function drawOrders(naive) {
    const width = Math.min(Math.max(box.clientWidth, 280), 640);
    const twice = Math.round((width * naive.duplicates) / naive.schedules);
    const said = [`${naive.duplicates} send twice`, `${naive.safe} send once`];
    orders.setAttribute("aria-label", `The naive claim's ${naive.schedules} orders: ` +
      `${said[0]}, ${said[1]}`);
    orders.setAttribute("viewBox", `0 0 ${width} 44`);
    orders.setAttribute("width", width);
    orders.setAttribute("height", 44);
    orders.replaceChildren(
      svg("rect", { "data-orders": "twice", x: 0, y: 0, width: twice, height: 18 }),
      svg("rect", { "data-orders": "once", x: twice, y: 0, width: width - twice, height: 18 }),
      svg("text", { x: 0, y: 36 }, `◼ ${said[0]}`),
      svg("text", { x: width, y: 36, "text-anchor": "end" }, `${said[1]} ◻`));
    ordersBox.hidden = false;
  }

  // ---- the steps as code

  function drawProgram(state) {
    program.replaceChildren(...state.program.map((step, index) => el("li",
      { "data-step": index },
      el("span", { class: "race-at" }, ...state.workers.map((worker, number) =>
        el("span", { class: worker.next === index ? "race-chip here" : "race-chip",
          "data-worker": number + 1 },
        el("span", { class: "visually-hidden" }, "next for worker "), String(number + 1)))),
      el("code", {}, step.code))));
  }

  // ---- the picture, in time

  // Where the columns go at this width: the step numbers, worker 1's lane,
  // the jobs row, worker 2's lane.
  function layout() {
    const width = Math.min(Math.max(box.clientWidth, NARROWEST), WIDEST);
    const row = Math.round(Math.min(Math.max(width * 0.26, 96), 170));
    const lane = Math.floor((width - TIME - row - 3 * GAP) / 2);
    const lanes = [TIME + GAP, TIME + 2 * GAP + lane + row + GAP];
    return { width, lane, row, lanes, rowAt: TIME + 2 * GAP + lane };
  }

    // Slot -1 is the start, before any step; slot i is after the log's step i.
  const top = (slot) => HEAD + (slot + 1) * SLOT;
  const middle = (slot) => top(slot) + SLOT / 2;

  // Text that fits its room: squeezed a little where it would not.
  function fitted(text, attributes, room) {
    const node = svg("text", attributes, text);
    fitting.push([node, room]);
    return node;
  }
  let fitting = [];

  function drawPicture(state) {
    const at = layout();
    const height = top(state.log.length + 1) + 6;   // the steps so far, and the next
    const bottom = (gap) => middle(gap.to === null ? state.log.length : gap.to);
    const head = `race-head-${views}`;
    fitting = [];
    const shade = state.gaps.map((gap) => svg("rect", { class: "race-gap",
      "data-worker": gap.worker + 1, x: at.lanes[gap.worker], width: at.lane,
      y: middle(gap.from), height: bottom(gap) - middle(gap.from) }));
    const overlap = state.overlap && svg("rect", { class: "race-overlap",
      x: at.lanes[0], width: at.lanes[1] + at.lane - at.lanes[0],
      y: middle(state.overlap.from), height: bottom(state.overlap) - middle(state.overlap.from) });
    const sends = state.log.filter((entry) => entry.step === "send");
    const marks = state.log.map((entry, slot) => {
      const x = at.lanes[entry.worker];
      // the outbox holds the emails in the order the sends ran
      const twice = entry.step === "send" && state.outbox[sends.indexOf(entry)].duplicate;
      return svg("g", { class: "race-step", "data-worker": entry.worker + 1,
        "data-slot": slot, "data-table": entry.table, "data-twice": twice ? "true" : null,
        onclick: () => goBack(slot) },
      svg("title", {}, `Back to just after step ${slot + 1}`),
      svg("rect", { x: x + 2, y: top(slot) + 3, width: at.lane - 4, height: SLOT - 6, rx: 4 }),
      fitted(entry.step, { class: "race-step-name", x: x + 8, y: top(slot) + 17 }, at.lane - 14),
      fitted(entry.short, { x: x + 8, y: top(slot) + 31 }, at.lane - 14));
    });
    // the jobs row at the start and wherever a step changed it
    const rows = [{ rows: state.start, over: null }, ...state.log].map((entry, index) => {
      const slot = index - 1;
      const before = index ? (state.log[slot - 1] || { rows: state.start }).rows : null;
      if (JSON.stringify(entry.rows) === JSON.stringify(before)) return null;
      const said = entry.rows.map(rowSaid).join("; ");
      const middleX = at.rowAt + at.row / 2;
      // a mark over another's takes a second line, to say whose it replaced
      return svg("g", { class: "race-row", "data-slot": slot,
        "data-over": entry.over ? "true" : null },
      svg("rect", { x: at.rowAt + 2, y: top(slot) + (entry.over ? 3 : 8), width: at.row - 4,
        height: SLOT - (entry.over ? 6 : 16), rx: 3 }),
      fitted(said, { x: middleX, y: top(slot) + (entry.over ? 18 : 25),
        "text-anchor": "middle" }, at.row - 12),
      entry.over ? fitted(`over ${entry.over}`, { x: middleX, y: top(slot) + 32,
        "text-anchor": "middle" }, at.row - 12) : null);
    });
    // a read: an arrow from the row's line into the lane; a write: into the
    // row as it changed
    const arrows = state.log.filter((entry) => entry.table).map((entry) => {
      const slot = state.log.indexOf(entry);
      const lane = entry.worker === 0 ? at.lanes[0] + at.lane - 2 : at.lanes[1] + 2;
      const edge = entry.table === "read" ? 0 : at.row / 2 - 2;
      const row = at.rowAt + at.row / 2 + (entry.worker === 0 ? -edge : edge);
      const [from, to] = entry.table === "read" ? [row, lane] : [lane, row];
      return svg("path", { class: `race-arrow ${entry.table}`, "data-slot": slot,
        d: `M ${from} ${middle(slot)} L ${to} ${middle(slot)}`, "marker-end": `url(#${head})` });
    });
    // what each worker runs next, dashed: click it to run it
    const next = state.log.length;
    const upcoming = state.workers.map((worker, index) => {
      const x = at.lanes[index];
      if (worker.done) {
        return svg("text", { class: "race-finished", x: x + at.lane / 2, y: top(next) + 24,
          "text-anchor": "middle" }, "finished");
      }
      return svg("g", { class: "race-next", "data-worker": index + 1,
        onclick: () => act("step", index) },
      svg("title", {}, `Run worker ${index + 1}'s next step`),
      svg("rect", { x: x + 2, y: top(next) + 3, width: at.lane - 4, height: SLOT - 6, rx: 4 }),
      svg("text", { class: "race-next-word", x: x + 8, y: top(next) + 17 }, "next"),
      fitted(worker.next_step, { x: x + 8, y: top(next) + 31 }, at.lane - 14));
    });
    const numbers = state.log.map((entry, slot) => svg("text", { class: "race-time",
      x: TIME - 4, y: top(slot) + 25, "text-anchor": "end" }, String(slot + 1)));
    picture.replaceChildren(
      svg("defs", {}, svg("marker", { id: head, viewBox: "0 0 10 10", refX: 9, refY: 5,
        markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      svg("path", { d: "M 0 0 L 10 5 L 0 10 Z" }))),
      svg("title", { id: `race-title-${views}` }, "The race in time: each worker's steps " +
        "in its lane, top to bottom, and the jobs row between them as each step left it"),
      svg("desc", { id: `race-desc-${views}` }, describe(state)),
      ...shade, overlap || null,
      svg("text", { class: "race-time", x: 0, y: 19 }, "step"),
      svg("text", { class: "race-time", x: TIME - 4, y: top(-1) + 25, "text-anchor": "end" },
        "0"),
      ...state.workers.map((worker, index) => svg("text", { class: "race-name",
        x: at.lanes[index] + at.lane / 2, y: 19, "text-anchor": "middle" }, worker.name)),
      svg("text", { class: "race-name", x: at.rowAt + at.row / 2, y: 19,
        "text-anchor": "middle" }, state.table.length === 1 ? "job 1's row" : "the jobs rows"),
      svg("line", { class: "race-row-axis", x1: at.rowAt + at.row / 2, x2: at.rowAt + at.row / 2,
        y1: HEAD - 4, y2: height - 4 }),
      ...numbers, ...rows, ...arrows, ...marks, ...upcoming);
    picture.setAttribute("viewBox", `0 0 ${at.width} ${height}`);
    picture.setAttribute("width", at.width);
    picture.setAttribute("height", height);
    // Squeeze only what does not fit; measured once it is on the page.
    for (const [node, room] of fitting) {
      if (node.getComputedTextLength() > room) {
        node.setAttribute("textLength", room);
        node.setAttribute("lengthAdjust", "spacingAndGlyphs");
      }
    }
    drawKey(state);
  }

  // A line under the picture for what it shows now, and no more.
  function drawKey(state) {
    const said = [];
    if (state.overlap) {
      said.push("Red: both workers have looked at the row and neither has marked it, " +
        "so both take the job.");
    } else if (state.gaps.length) {
      said.push("Shaded: a worker has looked at the row and not yet marked it.");
    } else if (!state.log.length) {
      said.push("Click a worker's dashed next step to run it, or use the buttons.");
    }
    if (state.log.length) said.push("Click a step to go back to just after it.");
    key.textContent = said.join(" ");
  }

  function describe(state) {
    const where = state.workers.map((worker) => {
      const now = worker.done ? `${worker.name} has finished`
        : `${worker.name} runs next: ${worker.next_step}`;
      return now + (worker.holds ? `; it believes it holds job ${worker.holds}` : "");
    });
    const steps = state.log.map((entry, slot) =>
      `${slot + 1}, ${state.workers[entry.worker].name}: ${entry.step}, ${entry.short}`);
    const rows = state.table.map((row) =>
      `job ${row.id} is ${row.status}, its worker column says ${row.worker || "nobody"}`);
    const gap = state.overlap ? " Both workers have looked and neither has marked the row: " +
      "both will claim the same job." : "";
    return `The ${state.claim} claim. ${steps.length ? `Steps: ${steps.join("; ")}. ` : ""}` +
      `${where.join(". ")}.${gap} In the jobs table, ${rows.join("; ")}.`;
  }

  // Drawn again for a new width.
  new ResizeObserver(() => {
    if (last && layout().width !== Number(picture.getAttribute("width"))) drawPicture(last);
  }).observe(box);
  document.fonts.ready.then(() => last && drawPicture(last));

  function draw(state) {
    last = state;
    drawProgram(state);
    drawPicture(state);
    seedShown.textContent = `seed ${seed}`;
    finished = state.workers.map((worker) => worker.done);
    stepButtons.forEach((button, index) => {
      button.disabled = state.workers[index].done;
    });
    back.disabled = !state.log.length;
    log.replaceChildren(...state.log.map((entry) => el("li", {},
      `${state.workers[entry.worker].name}: ${entry.said}`)));
    outbox.replaceChildren(...state.outbox.map((email) => el("li",
      { class: email.duplicate ? "duplicate" : "" },
      `job ${email.job}, sent by ${email.worker}`,
      email.duplicate ? el("strong", {}, " ⚠ duplicate") : null)));
    result.textContent = state.result;
    const said = state.workers.map((worker, index) => worker.last &&
      `Worker ${index + 1}: ${worker.last}`).filter(Boolean);
    announce([...said, state.result].join(". "));
  }

  return { draw };
}
