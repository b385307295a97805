// The race stepper (Chapter 4): two workers run Exercise 5's claim one
// statement at a time, in the order the reader chooses, on a real SQLite
// table. The picture sets each worker's own copy of the code side by side
// (stacked on a narrow screen), each with a pointer at the line it runs
// next and its local variables under it, and the jobs table's row between
// them. Below: a log of every step, in words. "Try every interleaving"
// runs all orders, counts duplicates and says why a real run rarely has one.

import { el, svg, player } from "../dom.js";

const STEP_MS = 700;                  // one statement per step when playing

// The picture's measures, in pixels (the SVG draws at 1:1).
const ROW = 16;                       // one line of code
const GUTTER = 38;                    // pointer and line number, left of the code
const ROW_BOX = 156;                  // the jobs table's column, between the workers
const INSET = 16;                     // room each side of the row's box, for an arrow
const GAP = 14;
const ENVELOPE = 40;                  // one email's height in the picture's outbox
const OUTBOX = 24 + ENVELOPE + 8;     // the outbox's height when the columns stack
const FEWEST_CHARS = 40;              // narrower code columns than this: stack them

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

// A line of code cut into pieces of at most width characters: before its
// comment if that is enough, else at a space; the pieces after the first
// are indented a little more than the line.
function wrap(line, width) {
  const indent = line.length - line.trimStart().length;
  const pieces = [];
  let rest = line.trimEnd();
  let lead = "";
  while ((lead + rest).length > width) {
    const room = width - lead.length;
    const comment = rest.search(/ {2,}# /);
    let cut = comment > 0 && comment <= room ? comment : rest.lastIndexOf(" ", room);
    if (cut <= rest.length - rest.trimStart().length) cut = room;
    pieces.push(lead + rest.slice(0, cut).trimEnd());
    rest = rest.slice(cut).trimStart();
    lead = " ".repeat(Math.min(indent + 4, Math.floor(width / 3)));
  }
  pieces.push(lead + rest);
  return pieces;
}

// The naive claim's gap: a worker that has found a job and not yet marked it.
function inTheGap(worker) {
  return !worker.done && !worker.holds &&
    worker.locals.some(([name, value]) => name === "oldest" && value !== "None");
}

const STATUS_MARK = { queued: "○", running: "◐", done: "●" };

let views = 0;                        // a page may hold more than one

export default function race(body, { act, announce, tasks }) {
  views += 1;
  const group = `race-claim-${views}`; // one group: one tab stop, arrow keys choose
  let claim = "naive";
  let seed = 1;
  let random = seeded(seed);
  let finished = [false, false];
  let last = null;                    // the state last drawn
  let built = "";                     // what the code columns were built for
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
  // Named and described by its own title and desc, redrawn at each step.
  const picture = svg("svg", { role: "img", "aria-labelledby": `race-title-${views}`,
    "aria-describedby": `race-desc-${views}` });
  const box = el("div", { class: "sim-picture race-picture" }, picture);
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
      ...stepButtons, play, el("label", {}, "Speed ", speed),
      el("button", { type: "button", onclick: () => restart(seed + 1) }, "Another order"),
      el("button", { type: "button", onclick: () => restart(seed) }, "Reset"),
      el("button", { type: "button", onclick: tryEveryOrder }, "Try every interleaving"),
      seedShown),
    el("p", { class: "race-key" }, "Each worker runs its own copy of the code: ",
      el("span", { "aria-hidden": "true" }, "▶"), " and the marked line are where it is now, ",
      "the statement it runs at its next step. The jobs table sits between them."),
    box,
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

  // ---- the picture

  // The width of one character of the code's font, as drawn now (the
  // course's font may arrive after the first drawing).
  function measure() {
    const probe = svg("text", { class: "race-code" }, "0123456789");
    picture.append(probe);
    const width = probe.getComputedTextLength() / 10;
    probe.remove();
    return width || 7.25;
  }

  // Where things go at this width: side by side, or one above the other.
  function layout() {
    const width = Math.max(box.clientWidth, 280);
    const char = measure();
    const wide = Math.floor((width - ROW_BOX - 2 * GAP) / 2);
    if ((wide - GUTTER) / char >= FEWEST_CHARS) {
      return { width, char, wide: true, column: wide,
        chars: Math.floor((wide - GUTTER - 12) / char) };
    }
    return { width, char, wide: false, column: width,
      chars: Math.floor((width - GUTTER - 12) / char) };
  }

  let parts = null;                   // the pieces each draw updates

  // The two code columns, the row's place and the locals' place: rebuilt
  // when the code or the width changes, not at every step, so that a pointer
  // can glide from line to line.
  function build(state, at) {
    const rows = [];                  // [line number or null, text, first piece of its line]
    state.code.forEach((line, index) => {
      wrap(line, at.chars).forEach((piece, part) => rows.push([index + 1, piece, part === 0]));
    });
    const codeTop = 24;
    const codeHeight = rows.length * ROW + 8;
    const localsTop = codeTop + codeHeight + 8;
    const columnHeight = localsTop + 3 * ROW + 6;
    const rowHeight = 20 + state.table.length * (at.wide ? 76 : 44) + 20 + (at.wide ? 0 : OUTBOX);
    const workers = state.workers.map((worker, index) => {
      const lines = new Map();
      rows.forEach(([number, text, first], row) => {
        if (!lines.has(number)) {
          lines.set(number, svg("g", { class: "race-line", "data-line": number }));
        }
        const y = codeTop + 4 + row * ROW;
        lines.get(number).append(
          svg("rect", { class: "race-mark", x: 0, y, width: at.column, height: ROW }),
          first ? svg("text", { class: "race-number", x: GUTTER - 8, y: y + 12,
            "text-anchor": "end" }, String(number)) : null,
          svg("text", { class: "race-code", x: GUTTER, y: y + 12 }, text));
      });
      const tops = new Map();
      rows.forEach(([number], row) => {
        if (!tops.has(number)) tops.set(number, codeTop + 4 + row * ROW);
      });
      const pointer = svg("g", { class: "race-pointer" },
        svg("path", { d: `M 3 2 L 14 ${ROW / 2} L 3 ${ROW - 2} Z` }));
      const locals = svg("text", { class: "race-locals", x: 8, y: localsTop + 12 });
      const holds = svg("text", { class: "race-holds", x: 8, y: localsTop + 12 + ROW });
      const column = svg("g", { class: "race-worker", "data-worker": index + 1 },
        svg("rect", { class: "race-code-box", x: 0, y: codeTop, width: at.column,
          height: codeHeight, rx: 4 }),
        svg("text", { class: "race-name", x: 2, y: 16 }, worker.name),
        ...lines.values(), pointer,
        svg("rect", { class: "race-locals-box", x: 0, y: localsTop, width: at.column,
          height: 3 * ROW + 6, rx: 4 }),
        locals, holds);
      return { column, lines, tops, pointer, locals, holds };
    });
    const table = svg("g", { class: "race-table" });
    const arrow = svg("g");
    let height;
    // where each column and the table start, in the picture's own coordinates
    const columns = at.wide
      ? [[0, 0], [at.column + ROW_BOX + 2 * GAP, 0]]
      : [[0, 0], [0, columnHeight + rowHeight + 3 * GAP]];
    const tableAt = at.wide ? [at.column + GAP, codeTop] : [0, columnHeight + GAP];
    columns.forEach(([x, y], index) => {
      workers[index].column.setAttribute("transform", `translate(${x} ${y})`);
    });
    table.setAttribute("transform", `translate(${tableAt[0]} ${tableAt[1]})`);
    height = at.wide ? columnHeight : 2 * columnHeight + rowHeight + 3 * GAP;
    const head = `race-head-${views}`;
    picture.replaceChildren(
      svg("defs", {}, svg("marker", { id: head, viewBox: "0 0 10 10", refX: 9, refY: 5,
        markerWidth: 8, markerHeight: 8, orient: "auto-start-reverse" },
      svg("path", { d: "M 0 0 L 10 5 L 0 10 Z" }))),
      svg("title", { id: `race-title-${views}` }, "The race: each " +
      "worker's code with where it is, its local values, and the jobs table between them"),
      svg("desc", { id: `race-desc-${views}` }), table, arrow, ...workers.map((worker) => worker.column));
    picture.setAttribute("viewBox", `0 0 ${at.width} ${height}`);
    picture.setAttribute("width", at.width);
    picture.setAttribute("height", height);
    parts = { workers, table, arrow, at, columns, tableAt, head, columnHeight,
      desc: picture.querySelector("desc") };
  }

  function drawTable(state) {
    const { at, table } = parts;
    const left = at.wide ? INSET : 0;
    const width = at.wide ? ROW_BOX - 2 * INSET : at.width;
    const height = at.wide ? 70 : 38;
    const children = [svg("text", { class: "race-table-name", x: left, y: 12 }, "jobs table")];
    state.table.forEach((row, index) => {
      const holder = row.worker || "nobody";
      const status = `${STATUS_MARK[row.status] || "?"} ${row.status}`;
      const lines = at.wide
        ? [`job ${row.id}`, status, "worker column:", holder]
        : [`job ${row.id}   ${status}`, `worker column: ${holder}`];
      const top = 20 + index * (height + 6);
      children.push(svg("g", { class: "race-row", "data-job": row.id, "data-status": row.status },
        svg("rect", { x: left, y: top, width, height, rx: 4 }),
        lines.map((text, line) => svg("text", { x: left + 8, y: top + 15 + line * ROW,
          class: line === 0 ? "race-row-id" : "" }, text))));
    });
    // What the last step did to the table, in words, and (side by side) as
    // an arrow: out of the row for a read, into it for a write.
    const entry = state.log[state.log.length - 1];
    const touched = entry && entry.table;
    const below = 20 + state.table.length * (height + 6) + 14;
    if (touched) {
      // side by side, on two lines, to fit between the columns
      const x = at.wide ? ROW_BOX / 2 : 0;
      children.push(svg("text", { class: "race-touch", x, y: below,
        "text-anchor": at.wide ? "middle" : "start" },
      svg("tspan", {}, `${state.workers[entry.worker].name} `),
      svg("tspan", at.wide ? { x, dy: ROW } : {}, `${touched} the row`)));
    }
    children.push(drawOutbox(state, below + (at.wide ? 2 * ROW + 8 : ROW)));
    table.replaceChildren(...children);
    parts.arrow.replaceChildren();
    if (touched) {
      const { columns, tableAt, workers, columnHeight } = parts;
      let worker, row;              // the arrow's ends: at the worker, at the row
      if (at.wide) {
        const lineY = columns[entry.worker][1] +
          workers[entry.worker].tops.get(entry.lines[0]) + ROW / 2;
        const rowY = tableAt[1] + 20 + height / 2;
        worker = [entry.worker === 0 ? at.column + 2 : columns[1][0] - 2, lineY];
        row = [entry.worker === 0 ? tableAt[0] + INSET : tableAt[0] + ROW_BOX - INSET, rowY];
      } else {                      // stacked: straight up to worker 1, down to worker 2
        const x = at.width - 24;
        worker = [x, entry.worker === 0 ? columnHeight + 2 : columns[1][1] - 2];
        row = [x, entry.worker === 0 ? tableAt[1] + 20
          : tableAt[1] + 20 + state.table.length * (height + 6) - 6];
      }
      const [from, to] = touched === "read" ? [row, worker] : [worker, row];
      parts.arrow.append(svg("path", { class: `race-arrow ${touched}`, "data-table": touched,
        d: `M ${from[0]} ${from[1]} L ${to[0]} ${to[1]}`, "marker-end": `url(#${parts.head})` }));
    }
  }

  // The emails sent so far, as envelopes: under the row when side by side
  // (one below the other), in a line when stacked.
  function drawOutbox(state, top) {
    const { at } = parts;
    const left = at.wide ? INSET : 0;
    const width = ROW_BOX - 2 * INSET;
    const group = svg("g", { class: "race-outbox" },
      svg("text", { class: "race-table-name", x: left, y: top + 12 }, "outbox"));
    state.outbox.forEach((email, index) => {
      const x = at.wide ? left : index * (width + GAP);
      const y = top + 20 + (at.wide ? index * (ENVELOPE + 8) : 0);
      group.append(svg("g", { class: "race-email", "data-duplicate": String(email.duplicate) },
        svg("rect", { x, y, width, height: ENVELOPE, rx: 3 }),
        svg("path", { class: "race-flap", d: `M ${x} ${y} L ${x + width / 2} ${y + 10} ` +
          `L ${x + width} ${y}` }),
        svg("text", { x: x + 6, y: y + 24 }, `job ${email.job}` +
          (email.duplicate ? " ⚠ duplicate" : "")),
        svg("text", { x: x + 6, y: y + 36, class: "race-email-from" },
          `sent by ${email.worker}`)));
    });
    if (!state.outbox.length) {
      group.append(svg("text", { class: "race-table-name", x: left, y: top + 36 }, "(empty)"));
    }
    return group;
  }

  function describe(state) {
    const where = state.workers.map((worker) => {
      const now = worker.done ? `${worker.name} has finished`
        : `${worker.name} runs next: ${worker.next_step}, line ${worker.next_line}`;
      const locals = worker.locals.map(([name, value]) => `${name} = ${value}`).join(", ");
      return now + (locals ? `; its ${locals}` : "") +
        (worker.holds ? `; it believes it holds job ${worker.holds}` : "") +
        (inTheGap(worker) ? "; it has looked, and not marked the row yet" : "");
    });
    const rows = state.table.map((row) =>
      `job ${row.id} is ${row.status}, its worker column says ${row.worker || "nobody"}`);
    const sent = state.outbox.map((email) => `job ${email.job} by ${email.worker}` +
      (email.duplicate ? ", a duplicate" : ""));
    return `The ${state.claim} claim. ${where.join(". ")}. In the jobs table, ${rows.join("; ")}. ` +
      `Emails sent: ${sent.length ? sent.join("; ") : "none"}.`;
  }

  function drawPicture(state) {
    const at = layout();
    const key = `${state.code.join("\n")}|${at.width}|${at.char}`;
    if (key !== built) {
      built = key;
      build(state, at);
    }
    state.workers.forEach((worker, index) => {
      const part = parts.workers[index];
      const next = new Set(worker.next_lines);
      part.lines.forEach((line, number) => line.classList.toggle("next", next.has(number)));
      if (worker.done) {
        part.pointer.setAttribute("visibility", "hidden");
        part.pointer.removeAttribute("data-line");
      } else {
        part.pointer.removeAttribute("visibility");
        part.pointer.setAttribute("data-line", worker.next_line);
        part.pointer.style.transform = `translate(0px, ${part.tops.get(worker.next_line)}px)`;
      }
      const locals = worker.locals.map(([name, value]) => `${name} = ${value}`);
      part.locals.replaceChildren(...(locals.length ? locals : ["no local values yet"])
        .map((text, line) => svg("tspan", { x: 8, dy: line ? ROW : 0 }, text)));
      part.locals.classList.toggle("empty", !locals.length);
      const gap = inTheGap(worker);
      const holds = worker.done ? ["finished"]
        : worker.holds ? [`believes it holds job ${worker.holds}`]
          : gap ? ["in the gap: it has looked, ", "and not marked the row yet"]
            : ["holds no job"];
      part.holds.replaceChildren(...holds.map((text, line) =>
        svg("tspan", { x: 8, dy: line ? ROW : 0 }, text)));
      part.holds.classList.toggle("gap", gap);
    });
    drawTable(state);
    parts.desc.textContent = describe(state);
  }

  // Drawn again for a new width, or once the course's font has come.
  new ResizeObserver(() => {
    if (last && layout().width !== parts?.at.width) drawPicture(last);
  }).observe(box);
  document.fonts.ready.then(() => last && drawPicture(last));

  function draw(state) {
    last = state;
    drawPicture(state);
    seedShown.textContent = `seed ${seed}`;
    finished = state.workers.map((worker) => worker.done);
    stepButtons.forEach((button, index) => {
      button.disabled = state.workers[index].done;
    });
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
