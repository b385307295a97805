// The O7 story (Chapter 10) as a sequence diagram: a lane for the queue,
// one for each worker that has acted and one for the provider; each step
// of the story, told and run by Exercise 9's own replay_o7(), is added as
// arrows between the lanes (a delivery, a request, a charge, an
// acknowledgement), a crash on its worker's lane, or a note across them
// all. Time runs down, a row a step, on an axis broken where hours pass;
// the bands on the provider's lane are how long it keeps each operation's
// keys. Every word and mark comes from the engine's state. The switch is
// the chapter's Break It: pay in one request.

import { el, sideways, svg } from "../dom.js";
import { SMALL_CHAR, wrap } from "../picture.js";

const LEAST_WIDTH = 300;       // narrower than this, the diagram scrolls sideways
const GUTTER = 58;             // the time axis: a step's number and its time
const HEAD = 34;               // the lanes' names, above their lines
const LEAD = 13;               // a line of the 11 px labels
const GAP = 12;                // between one arrow and the next
const BREAK = 22;              // more room where the axis skips hours
const LONG = 3600;             // a gap on the axis longer than this is broken
const BAND = 8;                // a key window's width, and the room between two
const BAND_ROOM = 12;

// Words in lines of at most `width` px, centred on x or starting at it.
function label(text, x, y, width, attributes = {}) {
  const lines = wrap(text, Math.max(6, Math.floor(width / SMALL_CHAR)));
  return svg("text", { x, y, ...attributes }, lines.map((line, number) =>
    svg("tspan", { x, dy: number ? LEAD : 0 }, number < lines.length - 1 ? `${line} ` : line)));
}

const linesOf = (text, width) => wrap(text, Math.max(6, Math.floor(width / SMALL_CHAR))).length;

function diagram() {
  const title = svg("title");
  const desc = svg("desc", { id: "o7-diagram-desc" });
  const drawing = svg("g");
  const image = svg("svg", { class: "o7-diagram", role: "img", "aria-describedby": desc.id },
    title, desc, drawing);
  // Narrower than its least width (a small phone), it scrolls sideways, and says so.
  const box = el("div", { class: "sim-picture sim-scroll o7-picture" }, image);
  const element = el("div", {}, sideways(box, "diagram"), box);

  function draw(state) {
    const width = Math.max(box.clientWidth, LEAST_WIDTH);
    const operations = [...new Set(state.key_windows.map((window) => window.operation))];
    const right = 8 + BAND_ROOM * Math.max(operations.length, 1);
    const lanes = state.lanes;
    const room = (width - GUTTER - right) / lanes.length;
    const x = Object.fromEntries(lanes.map((lane, n) => [lane.id, GUTTER + room * (n + 0.5)]));
    const first = x[lanes[0].id];
    const last = x[lanes[lanes.length - 1].id];

    // The rows, in time: each step, and the end of each key window that
    // ended before the last step (at the same moment, before the step).
    const rows = [
      ...state.steps.map((step) => ({ seconds: step.seconds, order: 1, step })),
      ...state.key_windows.filter((window) => window.forgotten)
        .map((window) => ({ seconds: window.until, order: 0, window })),
    ].sort((a, b) => a.seconds - b.seconds || a.order - b.order);

    const marks = [];            // what is drawn over the lanes
    const axis = [];             // the step numbers and times
    const arrowAt = {};          // step number -> the y of each of its arrows
    const endAt = new Map();     // a key window that ended -> the y of its end
    const newest = state.steps.length;
    let y = HEAD + 10;
    let day = null;
    let previous = null;
    for (const row of rows) {
      if (previous !== null && row.seconds - previous > LONG) {
        const at = y + BREAK / 2 - 4;
        axis.push(svg("path", { class: "o7-break", d: `M${GUTTER - 14} ${at + 3}l10 -5` +
          `M${GUTTER - 14} ${at + 8}l10 -5` }));
        y += BREAK;
      }
      previous = row.seconds;
      const [when, hour, n] = row.step ? [row.step.day, row.step.hour, row.step.n]
        : [row.window.until_day, row.window.until_hour, null];
      if (row.step) {
        arrowAt[n] = [];
        for (const arrow of row.step.arrows) {
          const [height, drawn, at] = arrowMark(arrow, y, x, first, last, n === newest, n);
          arrowAt[n].push(at);
          marks.push(drawn);
          y += height;
        }
      } else {
        const words = row.window.label;
        const lines = linesOf(words, last - first);
        const at = y + lines * LEAD + 2;
        const column = operations.indexOf(row.window.operation);
        marks.push(svg("g", { class: "o7-window-end", "data-operation": row.window.operation },
          svg("line", { class: "o7-window-rule", x1: GUTTER - 4, x2: x.provider + 4 +
            BAND_ROOM * column + BAND, y1: at, y2: at }),
          label(words, first - 24, y + 8, last - first, { class: "o7-window-words" }),
          svg("text", { class: "o7-hour", x: GUTTER - 7, y: at + 4, "text-anchor": "end" },
            hour)));
        endAt.set(row.window, at);
        y = at + GAP;
      }
      if (hour) {
        const at = row.step ? arrowAt[n][0] : endAt.get(row.window);
        axis.push(svg("g", { class: row.step ? "o7-when" : "o7-when o7-window-when" },
          n === null ? null : svg("text", { class: "o7-n", x: 2, y: at + 4 }, String(n)),
          row.step ? svg("text", { class: "o7-hour", x: GUTTER - 7, y: at + 4,
            "text-anchor": "end" }, hour) : null,
          when !== day ? svg("text", { class: "o7-day", x: GUTTER - 7, y: at - 9,
            "text-anchor": "end" }, when) : null));
        day = when;
      } else if (n !== null) {
        axis.push(svg("text", { class: "o7-n", x: 2, y: arrowAt[n][0] + 4 }, String(n)));
      }
    }
    if (!rows.length) {
      marks.push(label("Each step of the story is drawn here as you take it, time running " +
        "down.", (GUTTER + width - right) / 2, y + 4, width - right - GUTTER - 20,
      { class: "o7-hint", "text-anchor": "middle" }));
      y += 3 * LEAD + GAP;
    }
    const bottom = Math.max(y, HEAD + 40);
    const height = bottom + 6;

    // The key windows: a band on the provider's lane, from the request that
    // kept the key to its end, or on down past the last step.
    const bands = state.key_windows.map((window) => {
      const column = operations.indexOf(window.operation);
      const from = arrowAt[window.step]?.[window.arrow] ?? HEAD;
      const to = window.forgotten ? endAt.get(window) : bottom;
      const left = x.provider + 4 + BAND_ROOM * column;
      return svg("g", {},
        svg("rect", { class: "o7-window", "data-operation": window.operation,
          "data-step": window.step, "data-forgotten": String(window.forgotten),
          x: left, y: from, width: BAND, height: Math.max(to - from, 1) }),
        window.forgotten ? svg("line", { class: "o7-window-cap", x1: left - 2,
          x2: left + BAND + 2, y1: to, y2: to }) : null);
    });
    const lanesDrawn = lanes.map((lane) => svg("g", { class: "o7-lane", "data-lane": lane.id },
      svg("line", { class: "o7-lifeline", x1: x[lane.id], x2: x[lane.id], y1: HEAD - 4,
        y2: bottom }),
      svg("rect", { class: "o7-head", x: x[lane.id] - Math.min(room - 6, 76) / 2, y: 4,
        width: Math.min(room - 6, 76), height: HEAD - 8, rx: 4 }),
      svg("text", { class: "o7-lane-name", x: x[lane.id], y: HEAD / 2 + 4,
        "text-anchor": "middle" }, lane.name)));
    const axisLine = svg("line", { class: "o7-axis", x1: GUTTER - 4, x2: GUTTER - 4,
      y1: HEAD - 4, y2: bottom });
    image.setAttribute("width", width);
    image.setAttribute("height", height);
    image.setAttribute("viewBox", `0 0 ${width} ${height}`);
    drawing.replaceChildren(axisLine, ...lanesDrawn, ...bands, ...axis, ...marks);

    title.textContent = `O7 as a sequence diagram, with lanes for ` +
      `${lanes.map((lane) => lane.name).join(", ")}` +
      (state.steps.length ? `, after step ${state.steps.length}` : ", before its first step");
    desc.textContent = state.steps.map((step) =>
      `${step.n}. ${step.time ? `${step.time}: ` : ""}${step.text}` +
      (step.provider.length ? ` (${step.provider.join("; ")})` : "") + ".").join(" ");
  }

  return { element, box, draw };
}

// One arrow of a step: its height, what is drawn, and the y of its line.
function arrowMark(arrow, y, x, first, last, isNew, n) {
  const attributes = { class: `o7-arrow${isNew ? " o7-new" : ""}`, "data-step": n,
    "data-from": arrow.from ?? "", "data-to": arrow.to ?? "", "data-kind": arrow.kind };
  const kind = `o7-${arrow.kind}`;
  if (arrow.from === null || arrow.from === arrow.to) {
    if (arrow.from === null) {               // a note across every lane
      const lines = linesOf(arrow.label, last - first + 40);
      const at = y + lines * LEAD + 2;
      return [lines * LEAD + 2 + GAP + 4, svg("g", attributes,
        label(arrow.label, first - 20, y + 8, last - first + 40, { class: `o7-label ${kind}` }),
        svg("line", { class: "o7-rule", x1: first - 20, x2: last + 20, y1: at, y2: at })), at];
    }
    const at = y + 8;                        // a crash, on its worker's lane
    const cx = x[arrow.from];
    return [22 + GAP / 2, svg("g", attributes,
      svg("rect", { class: "o7-crash-box", x: cx - 8, y: at - 8, width: 16, height: 16,
        rx: 2 }),
      svg("path", { class: "o7-crash-cross", d: `M${cx - 4} ${at - 4}l8 8M${cx + 4} ${at - 4}` +
        "l-8 8" }),
      label(arrow.label, cx + 12, at + 4, 90, { class: `o7-label ${kind}` })), at];
  }
  const [x1, x2] = [x[arrow.from], x[arrow.to]];
  const toward = Math.sign(x2 - x1);
  const charged = arrow.kind === "charge" || arrow.kind === "twice";
  // The words over the arrow, clear of its coin; if they need more lines
  // than one there, they end where the arrow's right end is, and take the
  // room to its left, which no other arrow of the row uses.
  const coin = charged ? 30 : 0;
  const [left, right] = toward > 0 ? [x1, x2 - coin] : [x2 + coin, x1];
  const centred = linesOf(arrow.label, right - left - 10) === 1;
  const span = centred ? right - left - 10 : right - 6 - (GUTTER + 4);
  const lines = linesOf(arrow.label, span);
  const at = y + lines * LEAD + 2;
  const words = centred ? { x: (left + right) / 2, "text-anchor": "middle" }
    : { x: right - 6, "text-anchor": "end" };
  const parts = [
    label(arrow.label, words.x, y + 8, span, { class: `o7-label ${kind}`,
      "text-anchor": words["text-anchor"] }),
    svg("line", { class: `o7-shaft ${kind}`, x1, x2, y1: at, y2: at }),
    svg("path", { class: `o7-head-mark ${kind}`, d: `M${x2} ${at}l${-9 * toward} -5v10z` }),
  ];
  if (charged) {                             // money moved: a coin where the request lands
    const cx = x2 - 20 * toward;
    parts.push(svg("circle", { class: `o7-coin ${kind}`, cx, cy: at, r: 7 }),
      svg("text", { class: "o7-coin-mark", x: cx, y: at + 4, "text-anchor": "middle" }, "$"));
  }
  let height = lines * LEAD + 2 + GAP;
  if (arrow.warning) {
    const below = linesOf(arrow.warning, span);
    parts.push(label(arrow.warning, words.x, at + LEAD + 2, span,
      { class: "o7-warning", "text-anchor": words["text-anchor"] }));
    height += below * LEAD + 2;
  }
  return [height, svg("g", { ...attributes, class: `${attributes.class} ${kind}` }, ...parts),
    at];
}

// What each kind of mark means, in the page's words; the key window's
// hours are the engine's.
function legend(hours) {
  const item = (swatch, words) => el("li", {},
    el("span", { class: `o7-swatch ${swatch}`, "aria-hidden": "true" }), words);
  return [
    item("o7-deliver", "a delivery from the queue"),
    item("o7-call", "a request to the provider, and its answer"),
    item("o7-charge", "a charge: money moves"),
    item("o7-twice", "a second charge for the same operation"),
    item("o7-crash", "a crash"),
    item("o7-band", `the provider keeps an operation's keys (${hours} h)`),
  ];
}

export default function o7(body, { act, announce, tasks }) {
  const picture = diagram();
  const steps = el("ol", { class: "sim-events o7-steps" });
  const key = el("ul", { class: "o7-legend", "aria-label": "What the marks mean" });
  const oneRequest = el("input", { type: "checkbox", id: "o7-one-request" });
  const next = el("button", { type: "button", onclick: () => act("next") }, "Next step of O7");

  body.append(
    el("section", { class: "o7-story" },
      el("div", { class: "sim-controls" }, next,
        el("button", { type: "button", onclick: () => act("reset", oneRequest.checked) },
          "Start O7 over"),
        el("span", { class: "sim-field" },
          el("label", { for: "o7-one-request" }, "Pay in one request "), oneRequest)),
      picture.element, key, steps),
    tasks);

  function draw(state) {
    picture.draw(state);
    key.replaceChildren(...legend(state.key_window_hours));
    steps.replaceChildren(...state.steps.map((step) => el("li",
      { class: step.n === state.steps.length ? "o7-newest" : "" },
      step.time ? `${step.time}: ${step.text}` : step.text)));
    next.disabled = state.finished;
    if (state.steps.length) {
      announce(state.steps[state.steps.length - 1].text);
    }
  }

  return { draw, resized: { box: picture.box, redraw: (state) => picture.draw(state) } };
}
