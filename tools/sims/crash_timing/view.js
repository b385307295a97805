// The crash-timing explorer (Chapters 5 to 8): one job's life, a crash at a
// moment the reader picks, under a protection the reader picks, then the
// recovery; and the matrix of every moment against every protection, each
// cell run for real. The picture draws the job's life as a line of steps,
// with a crash marker the reader drags or moves with the keys: each move
// runs the crash chosen, and the outcome redraws at once.

import { el, player, scrolling, sideways, svg } from "../dom.js";
import { CHAR, wrap } from "../picture.js";

const STEP_MS = 600;
const MARKS = { "exactly once": "✓", duplicate: "⚠", lost: "✗", "n/a": "–" };

function outcomeText(outcome, effects) {
  if (!outcome) {
    return "";
  }
  const count = effects === null || effects === undefined ? "" :
    ` (${effects} effect${effects === 1 ? "" : "s"})`;
  return `${MARKS[outcome] || ""} ${outcome}${count}`;
}

// What the points came to, in words: "the points added twice".
const ADDED = { 0: "never added", 1: "added once", 2: "added twice" };
function pointsSaid(effects) {
  return `the points ${ADDED[effects] || `added ${effects} times`}`;
}

// A crash point in words, as the chosen protection's code has it.
function momentSaid(point) {
  return point.id === "none" ? "no crash" : `crash ${point.detail}`;
}

// ---- the picture: the job's life as a line of stations, one per step of
// the protection's code; the crash points between them, each drawn by the
// shape of its outcome; a crash marker to drag or move with the keys; and
// the outcome, in words and as coins, one per time the points were added.

const LINE_Y = 62;               // the line of the job's life
const PAD = 44;                  // room for a label at either end
const LABEL_Y = LINE_Y + 28;     // a station's label, its first line
const LEADING = 14;              // and each line after it
const MARKER_WIDTH = 64;
const MARKER_HEIGHT = 80;

// The shape that says an outcome without colour: a tick in a ring for once,
// two rings for twice, a crossed dashed ring for lost.
function outcomeShape(outcome, x, y, r) {
  if (outcome === "duplicate") {
    return svg("g", { class: "ct-two" },
      svg("circle", { cx: x - r * 0.45, cy: y, r: r * 0.8 }),
      svg("circle", { cx: x + r * 0.45, cy: y, r: r * 0.8 }));
  }
  if (outcome === "lost") {
    const d = r * 0.5;
    return svg("g", { class: "ct-none" },
      svg("circle", { cx: x, cy: y, r }),
      svg("path", { d: `M${x - d} ${y - d}L${x + d} ${y + d}M${x + d} ${y - d}L${x - d} ${y + d}` }));
  }
  return svg("g", { class: "ct-one" },
    svg("circle", { cx: x, cy: y, r }),
    svg("path", { d: `M${x - r * 0.45} ${y}l${r * 0.3} ${r * 0.4}l${r * 0.6} -${r * 0.8}` }));
}

function label(text, x, y, width, attributes = {}) {
  const lines = wrap(text, width);
  return svg("text", { x, y, "text-anchor": "middle", ...attributes },
    lines.map((line, number) => svg("tspan", { x, dy: number ? LEADING : 0 },
      number < lines.length - 1 ? `${line} ` : line)));
}

function crashPicture({ moved, settled }) {
  // Its name is its own title, its description its desc: what it shows now.
  const title = svg("title");
  const desc = svg("desc", { id: "ct-picture-desc" });
  const drawing = svg("g");
  const image = svg("svg", { role: "img", class: "ct-picture-image",
    "aria-describedby": desc.id }, title, desc, drawing);
  const mark = svg("g", { "aria-hidden": "true" });
  const marker = svg("svg", { class: "ct-marker", role: "slider", tabindex: "0",
    "aria-label": "When the worker dies", "aria-valuemin": "0", width: MARKER_WIDTH,
    height: MARKER_HEIGHT, viewBox: `0 0 ${MARKER_WIDTH} ${MARKER_HEIGHT}` }, mark);
  // Narrower than its least width (a small phone), it scrolls sideways, and says so.
  const box = el("div", { class: "sim-picture sim-scroll ct-picture" }, image, marker);
  const element = el("div", {}, sideways(box, "picture"), box);

  let state = null;
  let order = [];                // the crash points, in the order of the job's life
  let at = 0;                    // the marker's place in that order
  let xs = [];                   // each crash point's x, for the width drawn
  let dragging = false;
  let held = 0;                  // choices asked for and not answered: the points may change

  const outcomeAt = (index) => state.outcomes[order[index].id];

  function place() {
    const width = Math.max(box.clientWidth, 300);
    const stations = state.stations.length;
    const gap = (width - 2 * PAD) / stations;
    const anchor = (number) => PAD + number * gap;
    xs = order.map((point) => {
      if (point.id === "none") {
        return anchor(stations);
      }
      const together = order.filter((other) => other.id !== "none" && other.after === point.after);
      const nth = together.indexOf(point) + 1;
      return anchor(point.after - 1) + (gap * nth) / (together.length + 1);
    });
    return { width, gap, anchor };
  }

  function redraw() {
    if (!state) {
      return;
    }
    const { width, gap, anchor } = place();
    const chars = Math.max(6, Math.floor(gap / CHAR) - 1);
    const stations = state.stations.length;
    // The outcome goes below the longest label, however many lines it takes.
    const lines = Math.max(...state.stations.map((station) => wrap(station.label, chars).length));
    const below = LABEL_Y + (lines - 1) * LEADING + 44;
    const height = below + 52;
    image.setAttribute("width", width);
    image.setAttribute("height", height);
    image.setAttribute("viewBox", `0 0 ${width} ${height}`);
    const line = svg("line", { class: "ct-line", x1: anchor(0), y1: LINE_Y, x2: anchor(stations),
      y2: LINE_Y });
    const stops = state.stations.map((station, number) => svg("g", {},
      svg("rect", { class: "ct-stop", x: anchor(number) - 7, y: LINE_Y - 7, width: 14,
        height: 14, rx: 2 }),
      label(station.label, anchor(number), LABEL_Y, chars, { class: "ct-station" })));
    const end = svg("g", {},
      svg("path", { class: "ct-end", d: `M${anchor(stations)} ${LINE_Y + 8}V${LINE_Y - 16}` +
        `l12 5l-12 5` }),
      label("no crash", anchor(stations), LABEL_Y, chars, { class: "ct-end-label" }));
    const points = order.map((point, index) => {
      const found = state.outcomes[point.id];
      return svg("g", { class: `ct-point ${found.outcome.replace(/\W+/g, "-")}`,
        "data-crash": point.id }, point.id === "none" ? null :
        outcomeShape(found.outcome, xs[index], LINE_Y, 7));
    });
    drawing.replaceChildren(line, ...stops, end, ...points, drawOutcome(width, below));
    moveMarker();
  }

  // The outcome of the crash at the marker: coins for the times the points
  // were added (a dashed empty one for none), its words, and a key.
  function drawOutcome(width, y) {
    const { outcome, effects } = outcomeAt(at);
    const coins = effects ? Array.from({ length: effects }, (_, number) =>
      svg("g", { class: "ct-coin" },
        svg("circle", { cx: PAD - 20 + number * 26, cy: y, r: 11 }),
        svg("text", { x: PAD - 20 + number * 26, y: y + 4, "text-anchor": "middle" }, "+"))) :
      [svg("circle", { class: "ct-no-coin", cx: PAD - 20, cy: y, r: 11 })];
    // On one line where there is room, else the outcome over what it means.
    const x = PAD - 20 + Math.max(effects, 1) * 26;
    const [first, second] = [`${MARKS[outcome]} ${outcome}: `, pointsSaid(effects)];
    const oneLine = x + (first.length + second.length) * CHAR * 1.2 < width;
    const words = svg("text", { class: `ct-outcome ${outcome.replace(/\W+/g, "-")}`, x,
      y: oneLine ? y + 5 : y - 3 },
    svg("tspan", {}, first), svg("tspan", oneLine ? {} : { x, dy: 17 }, second));
    const keys = [["exactly once", "once"], ["duplicate", "twice"], ["lost", "never"]];
    const step = Math.min(130, (width - 2 * (PAD - 20)) / keys.length);
    const legend = keys.map(([kind, words], number) => {
      const x = PAD - 12 + number * step;
      return svg("g", { class: `ct-key ${kind.replace(/\W+/g, "-")}` },
        outcomeShape(kind, x, y + 40, 6), svg("text", { x: x + 12, y: y + 44 }, words));
    });
    const whose = svg("text", { class: "ct-whose", x: PAD - 31, y: y - 19 },
      "Bob's points:");
    return svg("g", {}, whose, ...coins, words, ...legend);
  }

  // The marker at its crash point, and the slider's values in words.
  function moveMarker() {
    const point = order[at];
    const { outcome, effects } = outcomeAt(at);
    marker.style.left = `${xs[at] - MARKER_WIDTH / 2}px`;
    marker.setAttribute("aria-valuemax", String(order.length - 1));
    marker.setAttribute("aria-valuenow", String(at));
    marker.setAttribute("aria-valuetext", `${momentSaid(point)}: ${outcome}, ${pointsSaid(effects)}`);
    const middle = MARKER_WIDTH / 2;
    const shape = point.id === "none"
      ? svg("path", { class: "ct-arrow", d: `M${middle - 8} 24h16l-8 ${LINE_Y - 24 - 22}z` })
      : svg("path", { class: "ct-bolt", d: `M${middle + 5} 17L${middle - 8} 35h7l-4 ` +
          `${LINE_Y - 35 - 10}l14 -21h-7l5 -12z` });
    mark.replaceChildren(
      svg("text", { x: middle, y: 12, "text-anchor": "middle",
        class: `ct-marker-label${point.id === "none" ? " ct-safe" : ""}` },
        point.id === "none" ? "no crash" : "crash"),
      shape);
    const name = state.protections.find((item) => item.id === state.protection).name;
    const said = (other) => (other.id === "none" ? "No crash" : `A crash ${other.detail}`);
    title.textContent = `One job's life, ${name}: ` +
      `${state.stations.map((station) => station.label).join(", ")}. ` +
      `${said(point)}: ${outcome}, ${pointsSaid(effects)}.`;
    desc.textContent = order.map((other) => `${said(other)}: ${state.outcomes[other.id].outcome}.`)
      .join(" ");
  }

  function moveTo(index) {
    const next = Math.max(0, Math.min(order.length - 1, index));
    if (next !== at) {
      at = next;
      redraw();
      moved(order[at]);
    }
  }

  function settle() {
    settled(order[at]);
  }

  function nearest(clientX) {
    const x = clientX - box.getBoundingClientRect().left;
    let best = 0;
    xs.forEach((other, index) => {
      if (Math.abs(other - x) < Math.abs(xs[best] - x)) {
        best = index;
      }
    });
    return best;
  }

  const KEYS = { ArrowLeft: -1, ArrowDown: -1, ArrowRight: 1, ArrowUp: 1 };
  marker.addEventListener("keydown", (event) => {
    let index = null;
    if (event.key in KEYS) {
      index = at + KEYS[event.key];
    } else if (event.key === "Home") {
      index = 0;
    } else if (event.key === "End") {
      index = order.length - 1;
    }
    if (index === null || !state) {
      return;
    }
    event.preventDefault();
    if (held) {
      return;
    }
    const before = at;
    moveTo(index);
    if (at !== before) {
      settle();
    }
  });
  box.addEventListener("pointerdown", (event) => {
    if (!state || held || event.button !== 0) {
      return;
    }
    dragging = true;
    box.setPointerCapture(event.pointerId);
    marker.focus();
    moveTo(nearest(event.clientX));
    event.preventDefault();
  });
  box.addEventListener("pointermove", (event) => {
    if (dragging) {
      moveTo(nearest(event.clientX));
    }
  });
  const drop = () => {
    if (dragging) {
      dragging = false;
      settle();
    }
  };
  box.addEventListener("pointerup", drop);
  box.addEventListener("pointercancel", drop);
  new ResizeObserver(() => redraw()).observe(box);

  // A new state: the marker goes where the engine says, unless the reader
  // has moved it since and the engine has not caught up (`keep`).
  function draw(newState, keep) {
    state = newState;
    order = [...state.crash_points.filter((point) => point.id !== "none"),
      ...state.crash_points.filter((point) => point.id === "none")];
    const wanted = keep ? keep.id : state.crash;
    at = Math.max(0, order.findIndex((point) => point.id === wanted));
    redraw();
  }

  // While the engine answers a new choice, the marker stays where it is.
  return { element, draw, hold: (on) => { held += on ? 1 : -1; } };
}

export default function crashTiming(body, { act, announce, tasks }) {
  let state = null;
  let shown = 0;                       // timeline steps revealed so far
  const protection = el("select", { id: "ct-protection", onchange: () => choose() });
  const crash = el("select", { id: "ct-crash", "aria-describedby": "ct-detail",
    onchange: () => choose() });
  const play = el("button", { type: "button" }, "Play");
  const speed = el("select", { "aria-label": "Speed" },
    el("option", { value: "1" }, "1×"), el("option", { value: "3" }, "3×"));
  // What the chosen moment is in the chosen protection's code: the list and
  // the matrix name a moment the same way, whatever protection passes it.
  const detail = el("p", { class: "sim-status", id: "ct-detail" });
  const timeline = el("ol", { class: "sim-events" });
  const outcome = el("p", { class: "sim-result", "aria-live": "off" });
  const matrix = el("div", { class: "sim-matrix" });
  // The marker's moves: the picture redraws at once from the outcomes the
  // engine has found for every crash point; when the reader lets go, the
  // crash chosen runs for real, and its story shows below.
  let waiting = 0;                     // the marker's runs not yet answered
  let heading = null;                  // where the reader last put the marker
  const picture = crashPicture({
    moved: (point) => { heading = point; },
    settled: async (point) => {
      playing.stop();
      waiting += 1;
      await act("choose", protection.value, point.id, true);
      waiting -= 1;
      if (waiting === 0) {
        heading = null;
        showAll(`${momentSaid(point)[0].toUpperCase()}${momentSaid(point).slice(1)}: `);
      }
    },
  });
  body.append(
    el("div", { class: "sim-controls" },
      el("label", { for: "ct-protection" }, "Protection "), protection,
      el("label", { for: "ct-crash" }, "Crash "), crash,
      el("button", { type: "button", onclick: run }, "Run"),
      play,
      el("button", { type: "button", onclick: step }, "Step"),
      el("button", { type: "button", onclick: showAll }, "Show all"),
      el("label", {}, "Speed ", speed),
      el("button", { type: "button", onclick: showMatrix },
        "Show every crash and protection"),
      el("span", { class: "sim-clock" }, "no dice: the same choice always runs the same way")),
    el("p", { class: "ct-hint" }, "Drag the crash along the job's life, or focus it and use " +
      "the arrow keys: the outcome follows."),
    picture.element,
    detail,
    el("div", { class: "sim-panels" },
      el("section", { class: "wide" },
        el("h3", {}, "What happened"), timeline, outcome)),
    matrix,
    tasks);

  const ran = () => Boolean(state && state.outcome);   // the choice made has been run
  const playing = player(play, () => STEP_MS / Number(speed.value), step,
    () => ran() && shown >= state.timeline.length);

  function options(select, items, chosen) {
    select.replaceChildren(...items.map((item) =>
      el("option", { value: item.id, selected: item.id === chosen }, item.label)));
  }

  function choose() {
    playing.stop();
    picture.hold(true);
    act("choose", protection.value, crash.value).finally(() => picture.hold(false));
  }

  // Run answers at once: the whole story and its outcome.
  async function run() {
    playing.stop();
    await act("run");
    showAll();
  }

  // One more step of the story; a choice not yet run is run first.
  async function step() {
    if (!ran()) {
      shown = 0;
      await act("run");
    }
    if (ran() && shown < state.timeline.length) {
      shown += 1;
      reveal();
    }
  }

  function showAll(lead = "") {
    playing.stop();
    shown = ran() ? state.timeline.length : 0;
    reveal(typeof lead === "string" ? lead : "");
  }

  // The timeline up to the step reached; the outcome once it is all shown,
  // said after `lead` (what the marker chose, when it did).
  function reveal(lead = "") {
    const steps = state ? state.timeline.slice(0, shown) : [];
    timeline.replaceChildren(...steps.map((entry) => el("li", { class: `event-${entry.kind}` },
      `${entry.t.toFixed(1)} s, ${entry.who}: ${entry.what}`)));
    const done = state && state.outcome && shown >= state.timeline.length;
    outcome.textContent = done ? `Outcome: ${outcomeText(state.outcome, state.effects)}` : "";
    if (done) {
      announce(lead ? `${lead}${outcomeText(state.outcome, state.effects)}` : outcome.textContent);
    } else if (steps.length) {
      announce(steps[steps.length - 1].what);
    }
  }

  async function showMatrix() {
    const result = await act("matrix");
    if (!result) {
      return;
    }
    const header = el("tr", {}, el("th", { scope: "col" }, "Crash"),
      ...result.columns.map((column) => el("th", { scope: "col" }, column.name)));
    const rows = result.rows.map((row) => el("tr", {},
      el("th", { scope: "row" }, row.label),
      ...result.columns.map((column) => {
        const cell = result.cells[row.id][column.id];
        return el("td", { class: `outcome-${cell.outcome.replace(/\W+/g, "-")}` },
          outcomeText(cell.outcome, cell.outcome === "n/a" ? null : cell.effects));
      })));
    matrix.replaceChildren(el("h3", {}, "Every crash against every protection, each run"),
      scrolling(el("table", {}, el("thead", {}, header), el("tbody", {}, ...rows))));
    announce("The matrix of every crash and protection is shown below the timeline.");
  }

  function draw(newState, { newest }) {
    state = newState;
    if (newest) {
      options(protection, state.protections, state.protection);
      options(crash, state.crash_points, state.crash);
    }
    picture.draw(state, waiting ? heading : null);
    const point = state.crash_points.find((item) => item.id === state.crash);
    detail.textContent = `In this protection's code: ${point.detail}.`;
    if (shown > state.timeline.length || !state.outcome) {
      shown = 0;
    }
    reveal();
  }

  return { draw };
}
