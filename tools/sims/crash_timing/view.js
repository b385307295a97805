// The crash-timing explorer (Chapters 5 to 8): one job's life under every
// protection at once, a row each, and one crash marker over them all that
// the reader drags or moves with the keys: each row shows what a crash at
// the marker does under its protection, and each move runs that crash under
// all five for real. Below, the story of one protection (the one chosen)
// step by step, and the matrix of every moment against every protection as
// a grid of the rows' own shapes, each cell run for real.

import { el, player, scrolling, sideways, svg } from "../dom.js";
import { CHAR, wrap } from "../picture.js";

const STEP_MS = 600;
const MARKS = { "exactly once": "✓", duplicate: "⚠", lost: "✗", "n/a": "–" };
// An outcome as a row says it, and as the slider says it, briefly.
const WORDS = { "exactly once": "added once", duplicate: "added twice", lost: "never added",
  "n/a": "n/a" };
const BRIEF = { "exactly once": "once", duplicate: "twice", lost: "never", "n/a": "n/a" };
const KINDS = ["exactly once", "duplicate", "lost", "n/a"];

const kind = (outcome) => outcome.replace(/\W+/g, "-");

function outcomeText(outcome, effects) {
  if (!outcome) {
    return "";
  }
  const count = effects === null || effects === undefined ? "" :
    ` (${effects} effect${effects === 1 ? "" : "s"})`;
  return `${MARKS[outcome] || ""} ${outcome}${count}`;
}

// A moment in words, the same for every protection: "crash after the effect".
function momentSaid(moment) {
  return moment.id === "none" ? "no crash" : `crash ${moment.label}`;
}

const capital = (words) => `${words[0].toUpperCase()}${words.slice(1)}`;

// Every protection's outcome of one crash, briefly, in the rows' order.
function outcomesSaid(rows, outcomeOf) {
  return rows.map((row) => `${row.name} ${BRIEF[outcomeOf(row)]}`).join(", ");
}

// The shape that says an outcome without colour: a tick in a ring for once,
// two rings for twice, a crossed dashed ring for lost, a dash in a grey ring
// where the protection's code never passes the moment.
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
  if (outcome === "n/a") {
    return svg("g", { class: "ct-na-shape" },
      svg("circle", { cx: x, cy: y, r }),
      svg("path", { d: `M${x - r * 0.5} ${y}h${r}` }));
  }
  return svg("g", { class: "ct-one" },
    svg("circle", { cx: x, cy: y, r }),
    svg("path", { d: `M${x - r * 0.45} ${y}l${r * 0.3} ${r * 0.4}l${r * 0.6} -${r * 0.8}` }));
}

// The same shape alone, the size of a line of text: the grid's and legend's.
function glyph(outcome) {
  return svg("svg", { class: `ct-glyph ${kind(outcome)}`, width: 22, height: 18,
    viewBox: "0 0 22 18", "aria-hidden": "true" }, outcomeShape(outcome, 11, 9, 7));
}

function label(text, x, y, width, attributes = {}) {
  const lines = wrap(text, width);
  return svg("text", { x, y, "text-anchor": "middle", ...attributes },
    lines.map((line, number) => svg("tspan", { x, dy: number ? LEADING : 0 },
      number < lines.length - 1 ? `${line} ` : line)));
}

// ---- the picture: a row per protection, its steps on a line, and its
// crash points where the one marker stands for them. Every row shares the
// marker's stops, the moments in the order of a job's life and then no
// crash; a row's steps fall between the moments its code passes.

const PAD = 34;                  // room for a label at either end
const TOP = 42;                  // the marker's word and bolt, above the rows
const HEAD = 14;                 // a row's name and outcome, from its top
const LINE = 34;                 // its line, from its top
const LABEL = LINE + 24;         // a step's label, its first line
const LEADING = 14;              // and each line after it
const KEY = 30;                  // the key below the rows
const MARKER_WIDTH = 64;

function crashPicture({ moved, settled }) {
  // Its name is its own title, its description its desc: what it shows now.
  const title = svg("title");
  const desc = svg("desc", { id: "ct-picture-desc" });
  const drawing = svg("g");
  const image = svg("svg", { role: "img", class: "ct-picture-image",
    "aria-describedby": desc.id }, title, desc, drawing);
  const mark = svg("g", { "aria-hidden": "true" });
  const marker = svg("svg", { class: "ct-marker", role: "slider", tabindex: "0",
    "aria-label": "When the worker dies", "aria-valuemin": "0", width: MARKER_WIDTH },
  mark);
  // Narrower than its least width (a small phone), it scrolls sideways, and says so.
  const box = el("div", { class: "sim-picture sim-scroll ct-picture" }, image, marker);
  const element = el("div", {}, sideways(box, "picture"), box);

  let state = null;
  let at = 0;                    // the marker's stop, in state.moments
  let slot = () => 0;            // a stop's x, for the width drawn
  let lines = [];                // each row's line, its y
  let height = 0;
  let size = 7;
  let dragging = false;
  let held = 0;                  // choices asked for and not answered: the story may change

  const moment = () => state.moments[at];
  const pointOf = (row, id) => row.points.find((point) => point.id === id);
  // A row's outcome at the marker: n/a where its code never passes it.
  const outcomeOf = (row) => (pointOf(row, moment().id) || { outcome: "n/a" }).outcome;
  const effectsOf = (row) => (pointOf(row, moment().id) || { effects: null }).effects;

  function redraw() {
    if (!state) {
      return;
    }
    const width = Math.max(box.clientWidth, 300);
    const stops = state.moments.length;
    const gap = (width - 2 * PAD) / stops;
    slot = (index) => PAD + (index + 1) * gap;   // -1, the line's start: the claim
    size = gap < 50 ? 5.5 : 7;                    // a shape's radius: smaller on a phone
    const index = Object.fromEntries(state.moments.map((item, number) => [item.id, number]));
    let y = TOP;
    lines = [];
    const rows = state.rows.map((row) => {
      const drawn = drawRow(row, y, width, index);
      lines.push(y + LINE);
      y += drawn.height;
      return drawn.group;
    });
    height = y + KEY;
    image.setAttribute("width", width);
    image.setAttribute("height", height);
    image.setAttribute("viewBox", `0 0 ${width} ${height}`);
    drawing.replaceChildren(...rows, drawKey(width, y + 16));
    moveMarker();
  }

  // One protection's row: its name and its outcome at the marker, its
  // line of steps, and its crash points, each drawn by its outcome's shape.
  function drawRow(row, top, width, index) {
    const moments = row.points.filter((point) => point.id !== "none");
    // A step lies after the moments with no more steps before them, and
    // before the rest.
    const xs = row.stations.map((_, number) => {
      const before = moments.filter((point) => point.after <= number).map((point) => index[point.id]);
      const after = moments.filter((point) => point.after > number).map((point) => index[point.id]);
      const from = before.length ? Math.max(...before) : -2;
      const to = after.length ? Math.min(...after) : state.moments.length - 1;
      return slot((from + to) / 2);
    });
    const room = (number) => Math.min(
      number ? xs[number] - xs[number - 1] : 2 * xs[number],
      number < xs.length - 1 ? xs[number + 1] - xs[number] : 2 * (width - xs[number]));
    const labels = row.stations.map((station, number) => {
      const chars = Math.max(4, Math.floor(room(number) / CHAR) - 1);
      return [wrap(station.label, chars).length,
        label(station.label, xs[number], top + LABEL, chars, { class: "ct-station" })];
    });
    const rowHeight = LABEL + (Math.max(...labels.map(([count]) => count)) - 1) * LEADING + 16;
    const y = top + LINE;
    const end = slot(state.moments.length - 1);
    const outcome = outcomeOf(row);
    const chosen = row.id === state.protection;
    const group = svg("g", { class: `ct-row ${kind(outcome)}${outcome === "n/a" ? " ct-na" : ""}` +
      `${chosen ? " ct-chosen" : ""}`, "data-protection": row.id },
    svg("rect", { class: "ct-band", x: 0, y: top + 1, width, height: rowHeight - 2, rx: 4 }),
    svg("text", { class: "ct-row-name", x: 6, y: top + HEAD }, row.name),
    ...coins(effectsOf(row), outcome, width, top),
    svg("text", { class: "ct-row-outcome", x: width - 6, y: top + HEAD, "text-anchor": "end" },
      WORDS[outcome]),
    svg("line", { class: "ct-line", x1: slot(-1), y1: y, x2: end, y2: y }),
    ...row.stations.map((_, number) => svg("rect", { class: "ct-stop", x: xs[number] - size + 1,
      y: y - size + 1, width: 2 * size - 2, height: 2 * size - 2, rx: 2 })),
    ...labels.map(([, text]) => text),
    svg("path", { class: "ct-end", d: `M${end} ${y + 7}V${y - 14}l11 4.5l-11 4.5` }),
    ...moments.map((point) => svg("g", { class: `ct-point ${kind(point.outcome)}`,
      "data-crash": point.id }, outcomeShape(point.outcome, slot(index[point.id]), y, size))),
    outcome === "n/a" ? outcomeShape("n/a", slot(at), y, size - 1) : null);
    return { group, height: rowHeight };
  }

  // Bob's points as coins, one per time they were added (a dashed empty one
  // for none), just before the row's outcome in words.
  function coins(effects, outcome, width, top) {
    if (outcome === "n/a") {
      return [];
    }
    const right = width - 6 - WORDS[outcome].length * CHAR - 12;
    if (!effects) {
      return [svg("circle", { class: "ct-no-coin", cx: right, cy: top + HEAD - 4, r: 6 })];
    }
    return Array.from({ length: effects }, (_, number) =>
      svg("circle", { class: "ct-coin", cx: right - number * 15, cy: top + HEAD - 4, r: 6 }));
  }

  // What the shapes say, on one line below the rows.
  function drawKey(width, y) {
    const keys = [["exactly once", "once"], ["duplicate", "twice"], ["lost", "never"],
      ["n/a", "n/a"]];
    const step = Math.min(110, (width - 12) / keys.length);
    return svg("g", { class: "ct-key" }, keys.map(([outcome, words], number) => {
      const x = 14 + number * step;
      return svg("g", { class: kind(outcome) }, outcomeShape(outcome, x, y, 6),
        svg("text", { x: x + 12, y: y + 4 }, words));
    }));
  }

  // The marker at its stop, over every row, and the slider's values in words.
  function moveMarker() {
    const here = moment();
    const safe = here.id === "none";
    marker.style.left = `${slot(at) - MARKER_WIDTH / 2}px`;
    marker.setAttribute("height", height);
    marker.setAttribute("viewBox", `0 0 ${MARKER_WIDTH} ${height}`);
    marker.setAttribute("aria-valuemax", String(state.moments.length - 1));
    marker.setAttribute("aria-valuenow", String(at));
    marker.setAttribute("aria-valuetext",
      `${momentSaid(here)}: ${outcomesSaid(state.rows, outcomeOf)}`);
    const middle = MARKER_WIDTH / 2;
    const shape = safe
      ? svg("path", { class: "ct-arrow", d: `M${middle - 8} 17h16l-8 ${TOP - 21}z` })
      : svg("path", { class: "ct-bolt", d: `M${middle + 5} 15L${middle - 7} 29h6l-4 ` +
          `${TOP - 31}l13 -17h-6l4 -10z` });
    // A line down through the rows, broken where it would cover a row's
    // words or shapes.
    const stops = [TOP - 2, ...lines.flatMap((y) => [y - LINE, y - LINE + HEAD + 5, y - 10,
      y + 10]), height - KEY];
    const through = [];
    for (let number = 0; number < stops.length; number += 2) {
      through.push(`M${middle} ${stops[number]}V${stops[number + 1]}`);
    }
    mark.replaceChildren(
      svg("text", { x: middle, y: 11, "text-anchor": "middle",
        class: `ct-marker-label${safe ? " ct-safe" : ""}` }, safe ? "no crash" : "crash"),
      svg("path", { class: `ct-through${safe ? " ct-safe" : ""}`, d: through.join("") }),
      shape);
    title.textContent = `One job's life under five protections, ${momentSaid(here)}: ` +
      `${outcomesSaid(state.rows, outcomeOf)}.`;
    desc.textContent = state.rows.map((row) => `${row.name}: ` +
      `${row.stations.map((station) => station.label).join(", ")}; ` +
      row.points.map((point) => `${point.id === "none" ? "no crash" : `a crash ${point.label}`} ` +
        `${BRIEF[point.outcome]}`).join(", ") + ".").join(" ");
  }

  function moveTo(index) {
    const next = Math.max(0, Math.min(state.moments.length - 1, index));
    if (next !== at) {
      at = next;
      redraw();
      moved(moment());
    }
  }

  function settle() {
    settled(moment());
  }

  function nearest(clientX) {
    const x = clientX - box.getBoundingClientRect().left + box.scrollLeft;
    let best = 0;
    state.moments.forEach((_, index) => {
      if (Math.abs(slot(index) - x) < Math.abs(slot(best) - x)) {
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
      index = state ? state.moments.length - 1 : 0;
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
    const wanted = keep ? keep.id : state.crash;
    at = Math.max(0, state.moments.findIndex((item) => item.id === wanted));
    redraw();
  }

  // While the engine answers a new choice, the marker stays where it is.
  return { element, draw, hold: (on) => { held += on ? 1 : -1; } };
}

// ---- every moment against every protection: a grid of the same shapes

function matrixGrid(result) {
  // Each protection's name in a span of its own, which a table too narrow
  // for its names laid flat turns on its side (view.css).
  const header = el("tr", {}, el("th", { scope: "col" }, "Crash"),
    ...result.columns.map((column) => el("th", { scope: "col", title: column.label },
      el("span", {}, column.name))));
  const rows = result.rows.map((row) => el("tr", {},
    el("th", { scope: "row" }, row.label),
    ...result.columns.map((column) => {
      const cell = result.cells[row.id][column.id];
      const na = cell.outcome === "n/a";
      return el("td", { class: `ct-cell ${kind(cell.outcome)}${na ? " ct-na" : ""}` },
        glyph(cell.outcome),
        el("span", { class: "visually-hidden" },
          na ? "n/a" : outcomeText(cell.outcome, cell.effects).slice(2)));
    })));
  const legend = el("p", { class: "ct-legend" }, ...KINDS.map((outcome) =>
    el("span", {}, glyph(outcome), ` ${BRIEF[outcome]}`)));
  return [el("h3", {}, "Every crash against every protection, each run"), legend,
    scrolling(el("table", { class: "ct-grid" }, el("thead", {}, header),
      el("tbody", {}, ...rows)), { narrow: true })];
}

export default function crashTiming(body, { act, announce, tasks }) {
  let state = null;
  let shown = 0;                       // timeline steps revealed so far
  const protection = el("select", { id: "ct-protection", "aria-describedby": "ct-detail",
    onchange: () => choose() });
  const play = el("button", { type: "button" }, "Play");
  const speed = el("select", { "aria-label": "Speed" },
    el("option", { value: "1" }, "1×"), el("option", { value: "3" }, "3×"));
  // The chosen protection in full, and what the marker's moment is in its code.
  const detail = el("p", { class: "sim-status", id: "ct-detail" });
  const heading = el("h3", {}, "What happened");
  const timeline = el("ol", { class: "sim-events" });
  const outcome = el("p", { class: "sim-result", "aria-live": "off" });
  const matrix = el("div", { class: "sim-matrix" });
  // The marker's moves: the rows redraw at once from the outcomes the engine
  // has found for every crash point; when the reader lets go, that crash
  // runs under every protection for real, and the chosen one's story shows.
  let waiting = 0;                     // the marker's runs not yet answered
  let headed = null;                   // where the reader last put the marker
  const picture = crashPicture({
    moved: (moment) => { headed = moment; },
    settled: async (moment) => {
      playing.stop();
      waiting += 1;
      const found = await act("compare", moment.id);
      waiting -= 1;
      if (waiting === 0) {
        headed = null;
        showAll(false);
        if (found) {
          announce(`${capital(momentSaid(moment))}: ` +
            `${outcomesSaid(state.rows, (row) => found[row.id].outcome)}.`);
        }
      }
    },
  });
  body.append(
    el("p", { class: "ct-hint" }, "Drag the crash, or focus it and use the arrow keys: " +
      "each row is one protection."),
    picture.element,
    el("div", { class: "sim-controls" },
      el("label", { for: "ct-protection" }, "Protection "), protection,
      el("button", { type: "button", onclick: run }, "Run"),
      play,
      el("button", { type: "button", onclick: step }, "Step"),
      el("button", { type: "button", onclick: () => showAll() }, "Show all"),
      el("label", {}, "Speed ", speed),
      el("button", { type: "button", onclick: showMatrix },
        "Show every crash and protection"),
      el("span", { class: "sim-clock" }, "the same choice always runs the same way")),
    detail,
    el("div", { class: "sim-panels" },
      el("section", { class: "wide" }, heading, timeline, outcome)),
    matrix,
    tasks);

  const ran = () => Boolean(state && state.outcome);   // the choice made has been run
  const playing = player(play, () => STEP_MS / Number(speed.value), step,
    () => ran() && shown >= state.timeline.length);

  function choose() {
    playing.stop();
    picture.hold(true);
    act("choose", protection.value).finally(() => picture.hold(false));
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

  function showAll(say = true) {
    playing.stop();
    shown = ran() ? state.timeline.length : 0;
    reveal(say);
  }

  // The timeline up to the step reached; the outcome once it is all shown.
  function reveal(say = true) {
    const steps = state ? state.timeline.slice(0, shown) : [];
    timeline.replaceChildren(...steps.map((entry) => el("li", { class: `event-${entry.kind}` },
      `${entry.t.toFixed(1)} s, ${entry.who}: ${entry.what}`)));
    const done = state && state.outcome && shown >= state.timeline.length;
    outcome.textContent = done ? `Outcome: ${outcomeText(state.outcome, state.effects)}` : "";
    if (!say) {
      return;
    }
    if (done) {
      announce(outcome.textContent);
    } else if (steps.length) {
      announce(steps[steps.length - 1].what);
    }
  }

  async function showMatrix() {
    const result = await act("matrix");
    if (!result) {
      return;
    }
    matrix.replaceChildren(...matrixGrid(result));
    announce("The grid of every crash and protection is shown below the timeline.");
  }

  function draw(newState, { newest }) {
    const first = !state;
    state = newState;
    if (first || newest) {
      protection.replaceChildren(...state.protections.map((item) =>
        el("option", { value: item.id, selected: item.id === state.protection }, item.name)));
    }
    picture.draw(state, waiting ? headed : null);
    const chosen = state.rows.find((row) => row.id === state.protection);
    const here = state.moments.find((item) => item.id === state.crash);
    const point = chosen.points.find((item) => item.id === state.crash);
    detail.textContent = `${capital(chosen.label)}. ` + (point
      ? `At the marker, ${point.id === "none" ? "it runs to the end" : `it crashes ${point.detail}`}.`
      : `Its code never passes the marker's moment, ${here.label}.`);
    heading.textContent = `What happened: ${chosen.name}, ${momentSaid(here)}`;
    if (shown > state.timeline.length || !state.outcome) {
      shown = 0;
    }
    reveal(false);
  }

  return { draw };
}
