// The thundering herd (Chapter 6): clients turned away by one resource
// call again as their backoff policy says. Two pictures: every call, a row
// for each client across the whole run, for the chosen policy and beside it
// one that differs by jitter (a herd calls in step and fills columns,
// round after round; jitter smears the calls across the run); and the five
// policies' calls and time side by side, with the same clients and seed.

import { el, svg } from "../dom.js";
import { CHAR, many, ticks } from "../picture.js";

// A time as the engine's terminal program says it: 5.819 s, 12.3 s, 3 m 07 s.
function seconds(value) {
  if (value < 10) {
    return `${value.toFixed(3)} s`;
  }
  if (value < 60) {
    return `${value.toFixed(1)} s`;
  }
  return `${Math.floor(value / 60)} m ${String(Math.round(value % 60)).padStart(2, "0")} s`;
}

// A short span, in the unit that suits it: 4.5 µs, 3.84 ms, 0.45 s.
function span(value) {
  if (value < 0.001) {
    return `${+(value * 1e6).toPrecision(3)} µs`;
  }
  if (value < 1) {
    return `${+(value * 1000).toPrecision(3)} ms`;
  }
  return `${+value.toPrecision(3)} s`;
}

// The time axis of the comparison is logarithmic (the runs take from a
// thousandth of a second to minutes): its marks are powers of ten.
function decade(power) {
  const value = 10 ** power;
  if (value < 0.001) {
    return `${+(value * 1e6).toPrecision(1)} µs`;
  }
  if (value < 1) {
    return `${+(value * 1000).toPrecision(1)} ms`;
  }
  return `${+value.toPrecision(1)} s`;
}

export default function herd(body, { act, announce, tasks }) {
  const policy = el("select", { id: "herd-policy", onchange: () => configure() });
  const inputs = {
    clients: el("input", { type: "number", id: "herd-clients", min: "1", max: "500",
      step: "1", value: "100" }),
    base: el("input", { type: "number", id: "herd-base", min: "0.1", max: "1000",
      step: "any", value: "5" }),
    cap: el("input", { type: "number", id: "herd-cap", min: "0.1", max: "60000",
      step: "any", value: "2000" }),
    seed: el("input", { type: "number", id: "herd-seed", min: "0",
      max: String(Number.MAX_SAFE_INTEGER), step: "1", value: "1" }),
  };
  // A changed box runs the herd again with it, so that both pictures always
  // show what the controls say.
  for (const input of Object.values(inputs)) {
    input.addEventListener("change", () => configure());
  }
  const result = el("p", { class: "sim-result" });
  const axisSaid = el("p", { class: "herd-span" });
  const crowdsSaid = el("p", { class: "herd-crowds" });
  const rasters = [0, 1].map(() => svg("svg", { class: "herd-raster", role: "img" }));
  const compare = svg("svg", { class: "herd-compare", role: "img" });
  const rastersBox = el("div", { class: "sim-picture" }, rasters);
  const compareBox = el("div", { class: "sim-picture" }, compare);
  let named = false;         // the policies' names are in the menu: a state was drawn

  function labelled(id, text, input) {
    return el("span", { class: "sim-field" }, el("label", { for: id }, text), input);
  }

  body.append(
    el("div", { class: "sim-controls" },
      labelled("herd-policy", "Policy ", policy),
      labelled("herd-clients", "Clients ", inputs.clients),
      labelled("herd-base", "Base (ms) ", inputs.base),
      labelled("herd-cap", "Cap (ms) ", inputs.cap),
      labelled("herd-seed", "Seed ", inputs.seed)),
    result,
    el("section", {}, el("h3", {}, "Every call, a row for each client"),
      axisSaid, rastersBox, rasterLegend(), crowdsSaid),
    el("section", {}, el("h3", {}, "The five policies, same clients and seed"),
      compareBox,
      el("p", { class: "herd-legend" },
        "▶ marks the policy drawn above. Solid bars: calls, on an even scale. Hollow " +
        "bars: time to the last write, on a scale where each mark is ten times the last.")),
    tasks);

  function rasterLegend() {
    const key = (kind, words) => el("span", { class: "herd-key" },
      svg("svg", { width: "14", height: "10", viewBox: "0 0 14 10", "aria-hidden": "true" },
        svg("rect", { class: kind, x: 0, y: 0, width: kind === "herd-called" ? 14 : 4,
          height: 10 })),
      words);
    return el("p", { class: "herd-legend" },
      key("herd-called", "a client called in that slice of the run, and was turned away"),
      key("herd-taken", "its write was taken: that client is done"));
  }

  function settings() {
    return {
      policy: policy.value,
      clients: Number(inputs.clients.value),
      base: Number(inputs.base.value) / 1000,
      cap: Number(inputs.cap.value) / 1000,
      seed: Number(inputs.seed.value),
    };
  }

  // Run the herd again with the controls, if every box holds what it takes.
  async function configure() {
    const wrong = Object.values(inputs).find((input) => !input.checkValidity());
    if (wrong) {
      wrong.reportValidity();          // the browser says what the box takes
      return;
    }
    await act("configure", settings());
  }

  // A run as a raster: a row for each client, a column for each slice of
  // the run, filled where the client called. Clients in step fill the same
  // columns, round after round, so a herd is seen as stripes, by its shape
  // and not by its colour; jittered calls smear across the run. Each run
  // has its own time axis, which its caption says.
  function drawRaster(picture, run, state, chosen) {
    const clients = run.rows.length;
    const width = Math.max(280, rastersBox.clientWidth || 600);
    const left = 8 + CHAR * `client ${clients}`.length, right = 12;
    // Its caption, on two lines where one would not fit (a phone).
    const name = state.names[run.policy];
    const said = [`${chosen ? "▶ " : ""}${name}:`, `${many(run.calls, "call")} in ${seconds(run.seconds)}`];
    const caption = CHAR * said.join(" ").length > width - 8 ? said : [said.join(" ")];
    const top = 10 + 16 * caption.length, high = 150, bottom = top + high;
    const column = (width - left - right) / run.slices;
    const row = high / clients;
    const x = (n) => left + column * n;
    const cell = Math.max(1, column);
    // A client's slices in runs of neighbours, one rectangle a run.
    const called = run.rows.map((each, client) => {
      const y = top + row * client;
      const runs = [];
      for (const slice of each.called) {
        const last = runs[runs.length - 1];
        if (last && slice === last[1] + 1) {
          last[1] = slice;
        } else {
          runs.push([slice, slice]);
        }
      }
      return runs.map(([from, to]) => `M${x(from).toFixed(1)} ${y.toFixed(2)}` +
        `h${(x(to) - x(from) + cell).toFixed(1)}v${Math.max(0.6, row).toFixed(2)}` +
        `h${(-(x(to) - x(from) + cell)).toFixed(1)}z`).join("");
    }).join("");
    const taken = run.rows.map((each, client) => `M${x(each.taken).toFixed(1)} ` +
      `${(top + row * client).toFixed(2)}h${cell.toFixed(1)}v${Math.max(0.6, row).toFixed(2)}` +
      `h${(-cell).toFixed(1)}z`).join("");
    const perSecond = (width - left - right) / run.seconds;
    const axis = svg("g", { class: "herd-axis" },
      svg("line", { x1: left, x2: width - right, y1: bottom, y2: bottom }),
      svg("text", { x: left - 4, y: top + 8, "text-anchor": "end" }, "client 1"),
      svg("text", { x: left - 4, y: bottom, "text-anchor": "end" }, `client ${clients}`),
      ticks(run.seconds, perSecond).map(([t, words], i) => {
        const at = left + t * perSecond;
        // The first starts at its mark; one that would reach past the
        // picture's edge ends at it.
        const anchor = i === 0 ? "start"
          : at + (words.length * CHAR) / 2 > width ? "end" : "middle";
        return svg("g", {},
          svg("line", { x1: at, x2: at, y1: bottom, y2: bottom + 5 }),
          svg("text", { x: at, y: bottom + 18, "text-anchor": anchor }, words));
      }));
    picture.replaceChildren(
      ...caption.map((line, n) => svg("text", { class: "herd-caption", x: 4, y: 15 + 16 * n },
        line)),
      svg("path", { class: "herd-called", d: called }),
      svg("path", { class: "herd-taken", d: taken }),
      axis);
    const height = bottom + 26;
    picture.setAttribute("width", width);
    picture.setAttribute("height", height);
    picture.setAttribute("viewBox", `0 0 ${width} ${height}`);
    picture.dataset.policy = run.policy;
    // In words: how the calls share out among the slices. Clients in step
    // crowd into few slices, many in each; jitter spreads them thin.
    const busy = new Set(run.rows.flatMap((each) => each.called)).size;
    const cells = run.rows.reduce((sum, each) => sum + each.called.length, 0);
    picture.setAttribute("aria-label", `${name}${chosen ? " (chosen)" : ""}: every call of ` +
      `${clients} clients, a row each, from 0 to ${seconds(run.seconds)} in ${run.slices} ` +
      `slices. Calls fall in ${busy} of them, ${Math.round(cells / busy)} clients on ` +
      "average in each.");
  }

  function drawRasters(state) {
    state.rasters.forEach((run, n) => drawRaster(rasters[n], run, state, n === 0));
  }

  // The five policies, a row each: calls on an even scale, time on a scale
  // of powers of ten, each with its number in words.
  function drawCompare(state) {
    const chosen = state.settings.policy;
    const rows = Object.entries(state.policies);
    const width = Math.max(280, compareBox.clientWidth || 600);
    const narrow = width < 560;
    const nameRoom = narrow ? 0 : 12 + CHAR * Math.max(...rows.map(([p]) =>
      state.names[p].length + 2));
    // Wide: a row is the name, then the calls, then the time, side by side.
    // Narrow (a phone): the name, and under it the two bars, one above the
    // other, each as wide as the picture.
    const callsRoom = CHAR * 14, timeRoom = CHAR * 9;
    const half = narrow ? width : (width - nameRoom - 8) / 2;
    const callsArea = half - callsRoom - 6, timeArea = half - timeRoom - 6;
    const row = narrow ? 58 : 28, head = narrow ? 4 : 22;
    const callsX = nameRoom, timeX = narrow ? 0 : nameRoom + half + 8;
    const callsTop = narrow ? 20 : 6, timeTop = narrow ? 38 : 6;
    const mostCalls = Math.max(...rows.map(([, each]) => each.calls));
    const times = rows.map(([, each]) => each.seconds);
    const low = Math.log10(Math.min(...times)) - 0.3, high = Math.log10(Math.max(...times));
    const timeAt = (value) => (timeArea * (Math.log10(value) - low)) / (high - low || 1);
    const height = head + row * rows.length + 26;
    const grid = [];
    let free = -Infinity;            // where the last mark's words end
    for (let power = Math.ceil(low); power <= Math.floor(high); power += 1) {
      const at = timeX + timeAt(10 ** power);
      const words = decade(power);
      // Narrow, the marks cross only the time bars, not the calls above them.
      grid.push(narrow
        ? rows.map((_, i) => svg("line", { class: "herd-grid", x1: at, x2: at,
          y1: head + row * i + timeTop, y2: head + row * i + timeTop + 16 }))
        : svg("line", { class: "herd-grid", x1: at, x2: at, y1: head - 4,
          y2: head + row * rows.length }));
      if (at - (words.length * CHAR) / 2 > free + 4) {
        free = at + (words.length * CHAR) / 2;
        grid.push(svg("text", { class: "herd-grid-label", x: at, y: height - 8,
          "text-anchor": "middle" }, words));
      }
    }
    const drawn = rows.map(([name, each], i) => {
      const y = head + row * i;
      const mine = name === chosen;
      const callsWidth = (callsArea * each.calls) / mostCalls;
      const timeWidth = timeAt(each.seconds);
      return svg("g", { class: mine ? "herd-policy herd-mine" : "herd-policy",
        "data-policy": name, "data-chosen": String(mine) },
        mine ? svg("rect", { class: "herd-band", x: 0, y: y + 1, width, height: row - 2 }) : null,
        svg("text", { class: "herd-name", x: 4, y: y + (narrow ? 15 : 18) },
          mine ? svg("tspan", { class: "herd-chosen" }, "▶ ") : null, state.names[name]),
        svg("rect", { class: "herd-calls-bar", x: callsX, y: y + callsTop + 2,
          width: callsWidth, height: 12 }),
        svg("text", { class: "herd-calls", x: callsX + callsWidth + 6, y: y + callsTop + 12 },
          many(each.calls, "call")),
        svg("rect", { class: "herd-time-bar", x: timeX, y: y + timeTop + 2, width: timeWidth,
          height: 12 }),
        svg("text", { class: "herd-time", x: timeX + timeWidth + 6, y: y + timeTop + 12 },
          seconds(each.seconds)));
    });
    compare.replaceChildren(
      narrow ? null : svg("text", { class: "herd-head", x: callsX, y: 14 }, "calls"),
      narrow ? null : svg("text", { class: "herd-head", x: timeX, y: 14 },
        "time to the last write"),
      ...grid.flat(), ...drawn);
    compare.setAttribute("width", width);
    compare.setAttribute("height", height);
    compare.setAttribute("viewBox", `0 0 ${width} ${height}`);
    compare.setAttribute("aria-label", "The five policies with the same clients and seed: " +
      rows.map(([name, each]) => `${state.names[name]}${name === chosen ? " (shown)" : ""}, ` +
        `${many(each.calls, "call")} in ${seconds(each.seconds)}`).join("; ") + ".");
  }

  function draw(state) {
    const first = !named;
    // After the first draw the menu is the reader's: an answer to an older
    // call must not move it back (their next arrow key would start there).
    if (first) {
      policy.replaceChildren(...Object.entries(state.names).map(([value, words]) =>
        el("option", { value }, words)));
      policy.value = state.settings.policy;
    }
    const name = state.names[state.settings.policy];
    result.textContent = `${name}: ${many(state.calls, "call")} in ` +
      `${seconds(state.seconds)}; ` + (state.in_step
      ? `after the first instant, at most ${many(state.in_step, "client")} called at once.`
      : "no call after the first.");
    axisSaid.textContent = "Each run from its start to its last write, in " +
      `${state.rasters[0].slices} slices: ${state.rasters.map((run) =>
        `${state.names[run.policy]}, ${span(run.seconds / run.slices)} each`).join("; ")}.`;
    const crowds = state.crowds.slice(1);
    crowdsSaid.textContent = crowds.length
      ? `The first instants with two or more calls: all ${state.settings.clients} at 0 s, ` +
        `then ${crowds.map((each) => `${each.calls} at ${span(each.time)}`).join(", ")}.`
      : state.crowds.length
        ? `Two or more at one instant only at 0 s, when all ${state.settings.clients} start.`
        : "No two calls at one instant.";
    drawRasters(state);
    drawCompare(state);
    if (!first) {
      announce(result.textContent);
    }
    named = true;
  }

  // At a new width, sims.js has the same state redrawn to fit it.
  function redraw(state) {
    drawRasters(state);
    drawCompare(state);
  }

  return { draw, resized: { box: rastersBox, redraw } };
}
