// The retry budget (Chapter 11), in two pictures. The first is the load a
// failing backend gets, as calls per request, for each share of calls that
// fail: one line for clients that retry within their attempts alone, one for
// clients that also keep a budget. The second is a run, second by second: a
// backend stalls, and the calls per request and the share answered in time
// show whether it ever comes back. Play reveals that run a second at a
// time, behind a cursor the reader can also drag, or move by its slider.

import { el, player, sideways, svg } from "../dom.js";
import { CHAR, SMALL_CHAR, wrap } from "../picture.js";

const MARK = 1.2;             // the level the budget's line stays under, drawn as a line
const SECOND_MS = 250;        // how long Play shows a second of the run, at 1×
const CALM_SECONDS = 10;      // with reduced motion, Play moves this many seconds at a time
const CALM_MS = 1500;         // and holds each of its steps this long
const reducedMotion = window.matchMedia("(prefers-reduced-motion: reduce)");

function times(value) {
  return `${value.toFixed(1)}×`;
}

function percent(share) {
  return `${Math.round(share * 100)}%`;
}

// A text of one or more lines, each `step` px below the last; x is kept
// where the longest line still ends inside `width`.
function lines(attributes, words, fits, width, step = 14) {
  const cut = wrap(words, Math.max(8, fits));
  const longest = Math.max(...cut.map((line) => line.length)) * SMALL_CHAR;
  const x = Math.max(0, Math.min(attributes.x, width - longest - 2));
  return svg("text", { ...attributes, x }, cut.map((line, i) =>
    svg("tspan", { x, dy: i ? step : 0 }, line)));
}

// The share of a second's requests answered in time (an answer can come in
// the second after its request: the share is held at 1).
function share(second) {
  return Math.min(1, second.answered / second.offered);
}

// The calls a second the backend answers, over the requests a second that
// arrive (load is their share of its capacity): the calls per request above
// which its queue only grows.
function answerable(state) {
  return 1 / state.settings.load;
}

// The second before the cursor at `at` (seconds shown), in words: the
// slider's text for a screen reader.
function secondSaid(state, at) {
  if (at === 0) {
    return "0 s: the run has not started";
  }
  const second = state.seconds[at - 1];
  const stalled = state.stall_at <= at - 1 && at - 1 < state.stall_at + state.settings.stall;
  const said = second.offered ? `${(second.calls / second.offered).toFixed(1)} calls per ` +
    `request, ${percent(share(second))} answered in time` : "no requests";
  const spare = second.spare === null ? "" : `, ${second.spare} retries left in the budget`;
  return `${at - 1}–${at} s: ${said}${stalled ? ", stalled" : ""}${spare}`;
}

// The calls per request over the run's last 10 s.
function endLoad(state) {
  const tail = state.seconds.slice(-10);
  return tail.reduce((sum, each) => sum + each.calls, 0) /
    Math.max(1, tail.reduce((sum, each) => sum + each.offered, 0));
}

// What became of the run, in words, for the announcer and the chart's label.
function verdict(state) {
  const s = state.settings;
  const end = state.stall_at + s.stall;
  const load = endLoad(state);
  const able = answerable(state);
  const who = `${s.budget ? "With" : "Without"} a retry budget, ` +
    `${s.jitter ? "with" : "without"} jitter, at ${percent(s.load)} load`;
  const stall = s.stall > 0 ? `the backend stalls from ${state.stall_at} s to ${end} s`
    : "the backend never stalls";
  const after = `Over the last 10 s it gets ${load.toFixed(1)} calls for each request; ` +
    `it can answer ${able.toFixed(1)} (${state.capacity} calls a second).`;
  if (s.stall === 0) {
    return `${who}, the backend never stalls and stays healthy. ${after}`;
  }
  if (state.recovered_at === null) {
    return `${who}, ${stall} and never becomes healthy again: its retries keep it ` +
      `overloaded. ${after}`;
  }
  const late = state.recovered_at - end;
  return `${who}, ${stall} and is healthy from ${state.recovered_at} s on` +
    (s.stall > 0 && late > 0 ? `, ${late} s after the stall ended. ` : ". ") + after;
}

// The same in a line: what became of the backend, and the load that did it.
function headline(state) {
  const calls = `${endLoad(state).toFixed(1)} calls a request at the end, ` +
    `where it can answer ${answerable(state).toFixed(1)}`;
  if (state.settings.stall === 0) {
    return `Never stalled, healthy throughout: ${calls}.`;
  }
  if (state.recovered_at === null) {
    return `Never healthy again: ${calls}.`;
  }
  const late = state.recovered_at - state.stall_at - state.settings.stall;
  return `Healthy again ${late > 0 ? `${late} s after the stall` : "as the stall ends"}: ${calls}.`;
}

export default function retryBudget(body, { act, announce, tasks }) {
  const inputs = {
    budget: el("input", { type: "checkbox", id: "rb-budget" }),
    jitter: el("input", { type: "checkbox", id: "rb-jitter" }),
    load: el("input", { type: "range", min: "0.1", max: "1", step: "0.05", value: "0.6",
      id: "rb-load" }),
    stall: el("input", { type: "range", min: "0", max: "30", step: "1", value: "5",
      id: "rb-stall" }),
    seed: el("input", { type: "number", min: "0", value: "1", id: "rb-seed" }),
  };
  const shown = {
    load: el("output", { for: "rb-load" }),
    stall: el("output", { for: "rb-stall" }),
  };
  const say = () => {
    shown.load.textContent = ` ${percent(Number(inputs.load.value))}`;
    shown.stall.textContent = ` ${inputs.stall.value} s`;
  };
  say();
  inputs.load.addEventListener("input", say);
  inputs.stall.addEventListener("input", say);
  for (const input of Object.values(inputs)) {
    input.addEventListener("change", () => configure());
  }
  const result = el("p", { class: "sim-result" });
  const curves = svg("svg", { class: "rb-curves", role: "img" });
  const run = svg("svg", { class: "rb-run", role: "img" });
  const runBox = el("div", { class: "sim-scroll rb-scroll", tabindex: "0" }, run);
  const pictures = el("div", { class: "rb-pictures" });
  const key = el("p", { class: "rb-key" });

  // The run in time: the cursor is at `at`, the number of seconds shown.
  let at = null;
  let last = null;                   // the state drawn last
  let scale = null;                  // where drawRun put the seconds: { left, step }
  let marks = null;                  // what drawRun drew that the cursor shows or hides
  const play = el("button", { type: "button", class: "rb-play",
    "aria-describedby": "rb-how" }, "Play");
  const speed = el("select", { "aria-label": "Speed" },
    el("option", { value: "1" }, "1×"), el("option", { value: "3" }, "3×"));
  const slider = el("input", { type: "range", min: "0", step: "1", id: "rb-at" });
  const sliderShown = el("output", { for: "rb-at" });
  const how = el("p", { class: "rb-key", id: "rb-how" });
  const calm = () => reducedMotion.matches;
  const sayHow = () => {
    how.textContent = calm()
      ? `Your device asks for less motion: Play moves ${CALM_SECONDS} s at a time, ` +
        "without animation. The slider, its arrow keys and a click on the chart go to " +
        "any second."
      : "Play shows the run a second at a time. The slider, its arrow keys and a click " +
        "or drag on the chart go to any second.";
  };
  sayHow();
  reducedMotion.addEventListener("change", sayHow);
  const ended = () => !last || at >= last.seconds.length;
  // Play from the end starts the run again (this runs before player's own click).
  play.addEventListener("click", () => {
    if (play.getAttribute("aria-pressed") !== "true" && ended()) {
      showTo(0);
    }
  });
  const playing = player(play,
    () => (calm() ? CALM_MS : SECOND_MS / Number(speed.value)),
    () => showTo(calm() ? (Math.floor(at / CALM_SECONDS) + 1) * CALM_SECONDS : at + 1),
    ended);
  // While it plays the seconds to come are hidden; paused, they are faint.
  new MutationObserver(() => run.classList.toggle("rb-playing",
    play.getAttribute("aria-pressed") === "true"))
    .observe(play, { attributes: true, attributeFilter: ["aria-pressed"] });
  slider.addEventListener("input", () => {
    playing.stop();
    showTo(Number(slider.value));
  });
  const showAll = el("button", { type: "button", onclick: () => {
    playing.stop();
    showTo(last ? last.seconds.length : at);
  } }, "Show all");
  // A click on the chart, or a drag along it, puts the cursor there.
  const pointAt = (event) => {
    if (!scale || !last) {
      return;
    }
    const x = event.clientX - run.getBoundingClientRect().left;
    playing.stop();
    showTo(Math.round((x - scale.left) / scale.step));
  };
  run.addEventListener("pointerdown", (event) => {
    run.setPointerCapture(event.pointerId);
    pointAt(event);
  });
  run.addEventListener("pointermove", (event) => {
    if (run.hasPointerCapture(event.pointerId)) {
      pointAt(event);
    }
  });

  function field(name, text, extra = null) {
    return el("span", { class: "sim-field" },
      el("label", { for: inputs[name].id }, text), inputs[name], extra);
  }

  pictures.append(
    el("section", { class: "sim-picture rb-curves-box" },
      el("h3", {}, "Load on a failing backend"), curves, key),
    el("section", { class: "sim-picture" },
      el("h3", {}, "A stall, second by second"),
      el("div", { class: "sim-controls rb-player" }, play, showAll,
        el("label", {}, "Speed ", speed),
        el("span", { class: "sim-field rb-at" }, el("label", { for: "rb-at" }, "Second"),
          slider, sliderShown)),
      how, sideways(runBox, "picture", run), runBox));
  body.append(
    el("div", { class: "sim-controls rb-controls" },
      field("budget", "Retry budget"),
      field("jitter", "Jitter"),
      field("load", "Load", shown.load),
      field("stall", "Stall (s)", shown.stall),
      field("seed", "Seed")),
    result,
    pictures,
    tasks);

  async function configure() {
    if (!inputs.seed.checkValidity()) {
      inputs.seed.reportValidity();
      return;
    }
    await act("configure", {
      budget: inputs.budget.checked,
      jitter: inputs.jitter.checked,
      load: Number(inputs.load.value),
      stall: Number(inputs.stall.value),
      seed: Number(inputs.seed.value),
    });
  }

  // The load against the share failing: a line of circles without a budget,
  // a dashed line of squares with one, each named at its end; the line of
  // the reader's own setting drawn heavier.
  function drawCurves(state) {
    const rows = state.amplification;
    const width = Math.min(620, Math.max(300, pictures.clientWidth || 600));
    const names = { without: "no budget", with: `${percent(state.budget_share)} budget` };
    const ends = Object.entries(names).map(([line, name]) =>
      `${name}: ${times(rows[rows.length - 1][line])}`);
    const left = 34, right = 12 + CHAR * Math.max(...ends.map((end) => end.length));
    const top = 26, high = 150, bottom = top + high;
    const most = Math.max(3, ...rows.map((row) => row.without)) + 0.2;
    const least = 0.8;
    const x = (failing) => left + failing * (width - left - right);
    const y = (load) => bottom - ((load - least) / (most - least)) * high;
    const grid = [];
    for (let level = 1; level <= most; level += 1) {
      grid.push(svg("g", { class: "rb-grid" },
        svg("line", { x1: left, x2: x(1), y1: y(level), y2: y(level) }),
        svg("text", { x: left - 6, y: y(level) + 4, "text-anchor": "end" }, `${level}×`)));
    }
    const axis = svg("g", { class: "rb-axis" },
      svg("line", { x1: left, x2: x(1), y1: bottom, y2: bottom }),
      (x(1) - x(0) < 260 ? [0, 0.5, 1] : [0, 0.2, 0.4, 0.6, 0.8, 1]).map((failing) =>
        svg("g", {},
          svg("line", { x1: x(failing), x2: x(failing), y1: bottom, y2: bottom + 4 }),
          svg("text", { x: x(failing), y: bottom + 16, "text-anchor": "middle" },
            percent(failing)))),
      svg("text", { class: "rb-axis-name", x: (x(0) + x(1)) / 2, y: bottom + 32,
        "text-anchor": "middle" }, "share of calls failing"));
    const mine = state.settings.budget ? "with" : "without";
    const line = (which, point) => svg("g", {
      class: `rb-series${which === mine ? " rb-current" : ""}`, "data-line": which },
      svg("path", { class: "rb-line", "data-line": which,
        d: rows.map((row, i) => `${i ? "L" : "M"}${x(row.failing)} ${y(row[which])}`).join("") }),
      rows.map((row) => svg("g", { class: "rb-point", "data-line": which,
        "data-failing": row.failing },
        svg("title", {}, `${names[which]}, ${percent(row.failing)} failing: ` +
          `${row[which].toFixed(2)}× the requests`),
        point(x(row.failing), y(row[which])))),
      svg("text", { class: "rb-end", "data-line": which, x: x(1) + 8,
        y: y(rows[rows.length - 1][which]) + 4 },
        `${names[which]}: ${times(rows[rows.length - 1][which])}`));
    curves.replaceChildren(
      svg("desc", {}, rows.map((row) => `${percent(row.failing)} failing: ` +
        `${row.without.toFixed(2)}× without a budget, ${row.with.toFixed(2)}× with one.`)
        .join(" ")),
      svg("text", { class: "rb-title", x: 0, y: 12 }, "calls per request"),
      grid,
      axis,
      svg("line", { class: "rb-mark", x1: left, x2: x(1), y1: y(MARK), y2: y(MARK) }),
      svg("text", { class: "rb-mark-label", x: left + 4, y: y(MARK) - 5 }, times(MARK)),
      line("without", (cx, cy) => svg("circle", { cx, cy, r: 4 })),
      line("with", (cx, cy) => svg("rect", { x: cx - 3.5, y: cy - 3.5, width: 7, height: 7 })));
    const height = bottom + 40;
    curves.setAttribute("width", width);
    curves.setAttribute("height", height);
    curves.setAttribute("viewBox", `0 0 ${width} ${height}`);
    // Each line is named at its end: the key says only what the lines do not.
    key.textContent = `Up to ${state.attempts} attempts a request. The heavier line is ` +
      "your setting.";
    const dead = rows[rows.length - 1];
    const worst = Math.max(...rows.map((row) => row.with));
    curves.setAttribute("aria-label", "Calls per request on the backend, against the " +
      `share of calls that fail, with at most ${state.attempts} attempts a request. ` +
      `Without a budget (circles) the load climbs from ${times(rows[0].without)} to ` +
      `${times(dead.without)} when every call fails; with a ` +
      `${percent(state.budget_share)} budget (squares) it is ${times(dead.with)} then, ` +
      `${worst < MARK ? "and never reaches" : "and reaches"} the ${times(MARK)} line.`);
  }

  // The run: calls per request each second above, the share answered in
  // time below, the stall hatched over both, and where it came back.
  function drawRun(state) {
    const s = state.settings;
    const seconds = state.seconds;
    const width = Math.max(320, runBox.clientWidth || 600);
    const left = 40, right = 10;
    const step = (width - left - right) / seconds.length;
    const x = (t) => left + t * step;
    const able = answerable(state);
    const loads = seconds.map((each) => (each.offered ? each.calls / each.offered : 0));
    const most = Math.max(3, able, ...loads) * 1.08;
    const top1 = 22, high1 = 120, base1 = top1 + high1;
    const top2 = base1 + 30, high2 = 70, base2 = top2 + high2;
    const y1 = (load) => base1 - (load / most) * high1;
    const y2 = (part) => base2 - part * high2;
    // With a budget, a third strip: the retries it still allows.
    const budgeted = seconds.every((each) => each.spare !== null);
    const mostSpare = budgeted ? Math.max(1, ...seconds.map((each) => each.spare)) : 1;
    const top3 = base2 + 30, high3 = 50, base3 = top3 + high3;
    const y3 = (spare) => base3 - (spare / mostSpare) * high3;
    const bottom = budgeted ? base3 : base2;
    const every = most > 6 ? 2 : 1;
    const levels = [];
    for (let level = every; level < most; level += every) {
      levels.push(level);
    }
    const end = state.stall_at + s.stall;
    const parts = [];
    parts.push(svg("defs", {},
      svg("pattern", { id: "rb-hatch", width: "6", height: "6", patternUnits: "userSpaceOnUse",
        patternTransform: "rotate(45)" },
        svg("line", { class: "rb-hatch-line", x1: "0", y1: "0", x2: "0", y2: "6" }))));
    parts.push(svg("text", { class: "rb-title", x: 0, y: 12 }, "calls per request"));
    parts.push(svg("text", { class: "rb-title", x: 0, y: top2 - 8 },
      "share answered in time"));
    if (s.stall > 0) {
      parts.push(svg("g", { class: "rb-stall" },
        svg("rect", { x: x(state.stall_at), width: x(end) - x(state.stall_at), y: top1,
          height: bottom - top1, fill: "url(#rb-hatch)" })));
    }
    parts.push(svg("g", { class: "rb-grid" }, levels.map((level) => svg("g", {},
      svg("line", { x1: left, x2: x(seconds.length), y1: y1(level), y2: y1(level) }),
      svg("text", { x: left - 6, y: y1(level) + 4, "text-anchor": "end" }, `${level}×`))),
      [0, 0.5, 1].map((part) => svg("g", {},
        svg("line", { x1: left, x2: x(seconds.length), y1: y2(part), y2: y2(part) }),
        svg("text", { x: left - 6, y: y2(part) + 4, "text-anchor": "end" },
          percent(part)))),
      budgeted ? [0, mostSpare].map((spare) => svg("g", {},
        svg("line", { x1: left, x2: x(seconds.length), y1: y3(spare), y2: y3(spare) }),
        svg("text", { x: left - 6, y: y3(spare) + 4, "text-anchor": "end" }, String(spare))))
        : null));
    if (budgeted) {
      parts.push(svg("text", { class: "rb-title", x: 0, y: top3 - 8 },
        "retries the budget still allows"));
    }
    const said = seconds.map((each, i) => `${i} s: ${each.offered} requests, ` +
      `${each.calls} calls` + (each.offered ? ` (${times(loads[i])})` : "") +
      `, ${each.answered} answered in time` +
      (budgeted ? `, ${each.spare} retries left in the budget` : ""));
    const gap = step > 3 ? 1 : 0;
    const apart = step * 10 >= 56 ? 10 : 20;    // seconds between the axis's labels
    const bySecond = seconds.map(() => []);    // each second's marks, for the cursor
    seconds.forEach((each, i) => {
      if (budgeted && each.spare > 0) {
        bySecond[i].push(svg("rect", { class: "rb-spare", "data-second": i, x: x(i) + gap / 2,
          width: step - gap, y: y3(each.spare), height: base3 - y3(each.spare) },
          svg("title", {}, said[i])));
      }
      if (!each.offered) {
        parts.push(...bySecond[i]);
        return;
      }
      bySecond[i].push(svg("rect", { class: "rb-load", "data-second": i, x: x(i) + gap / 2,
        width: step - gap, y: y1(loads[i]), height: base1 - y1(loads[i]) },
        svg("title", {}, said[i])));
      bySecond[i].push(svg("rect", { class: "rb-answered", "data-second": i, x: x(i) + gap / 2,
        width: step - gap, y: y2(share(each)), height: base2 - y2(share(each)) },
        svg("title", {}, said[i])));
      parts.push(...bySecond[i]);
    });
    const ableWords = `it can answer ${times(able)}`;
    parts.push(svg("g", { class: "rb-capacity" },
      svg("line", { x1: left, x2: x(seconds.length), y1: y1(able), y2: y1(able) }),
      svg("text", { x: x(seconds.length) - 2, y: y1(able) - 4, "text-anchor": "end" },
        ableWords)));
    parts.push(svg("g", { class: "rb-healthy" },
      svg("line", { x1: left, x2: x(seconds.length), y1: y2(state.healthy),
        y2: y2(state.healthy) }),
      svg("text", { x: x(seconds.length) - 2, y: y2(state.healthy) - 4,
        "text-anchor": "end" }, `healthy: ${percent(state.healthy)}`)));
    parts.push(svg("g", { class: "rb-axis" },
      svg("line", { x1: left, x2: x(seconds.length), y1: base1, y2: base1 }),
      svg("line", { x1: left, x2: x(seconds.length), y1: base2, y2: base2 }),
      budgeted ? svg("line", { x1: left, x2: x(seconds.length), y1: base3, y2: base3 }) : null,
      Array.from({ length: Math.floor(seconds.length / apart) + 1 }, (_, i) => i * apart)
        .map((t) => svg("g", {},
          svg("line", { x1: x(t), x2: x(t), y1: bottom, y2: bottom + 4 }),
          svg("text", { x: x(t), y: bottom + 16,
            "text-anchor": t === seconds.length ? "end" : "middle" }, `${t} s`)))));
    let y = bottom + 36;
    const fits = Math.floor((width - 4) / SMALL_CHAR);
    if (s.stall > 0) {
      parts.push(svg("g", { class: "rb-stall" },
        svg("path", { class: "rb-bracket", d: `M${x(state.stall_at)} ${bottom + 20}v4` +
          `H${x(end)}v-4` }),
        lines({ x: x(state.stall_at), y }, `hatched: stalled ${state.stall_at}–${end} s`,
          fits, width)));
      y += 16;
    }
    const back = state.recovered_at;
    // The words on how it ended are shown once the cursor has passed the
    // second they are about (the end of the run, if it never came back).
    const told = back === null || s.stall === 0 ? seconds.length - 1 : back;
    if (back !== null && s.stall > 0) {
      const mark = svg("g", { class: "rb-recovered", "data-at": back },
        svg("line", { x1: x(back), x2: x(back), y1: top1, y2: bottom }));
      bySecond[told].push(mark);
      parts.push(mark);
    }
    const words = back === null ? "never healthy again: the retries keep it overloaded"
      : s.stall === 0 ? "no stall: healthy all along" : `▲ healthy from ${back} s on`;
    const from = back === null || s.stall === 0 ? 0 : x(back) - 4;
    const recovery = lines({ class: "rb-recovery", x: from, y }, words, fits, width);
    bySecond[told].push(recovery);
    parts.push(recovery);
    y += 14 * recovery.childElementCount + 4;
    const cursor = svg("g", { class: "rb-cursor", "aria-hidden": "true" },
      svg("line", { y1: top1, y2: bottom }),
      svg("text", { y: top1 + 10 }));
    parts.push(cursor);
    scale = { left, step };
    marks = { bySecond, cursor, x, width };
    run.replaceChildren(svg("desc", {}, `Each second: ${said.join("; ")}.`), ...parts);
    run.setAttribute("width", width);
    run.setAttribute("height", y);
    run.setAttribute("viewBox", `0 0 ${width} ${y}`);
    run.setAttribute("aria-label", `Calls per request, the share answered in time` +
      `${budgeted ? " and the retries the budget still allows" : ""}, ` +
      `each second of ${seconds.length}. ${verdict(state)}`);
  }

  // Shows the run's first `to` seconds; the cursor stands after them.
  function showTo(to) {
    const length = last.seconds.length;
    at = Math.max(0, Math.min(length, to));
    slider.max = String(length);
    slider.value = String(at);
    sliderShown.textContent = ` ${at} s`;
    slider.setAttribute("aria-valuetext", secondSaid(last, at));
    marks.bySecond.forEach((drawn, i) => {
      for (const mark of drawn) {
        mark.classList.toggle("rb-later", i >= at);
      }
    });
    // At the end the whole run is there, and needs no cursor.
    const { cursor, x, width } = marks;
    cursor.setAttribute("display", at === length ? "none" : "inline");
    cursor.dataset.second = at;
    const line = cursor.querySelector("line");
    line.setAttribute("x1", x(at));
    line.setAttribute("x2", x(at));
    // Its words right of it, or left where they would leave the picture.
    const words = cursor.querySelector("text");
    words.textContent = `${at} s`;
    const right = x(at) + 4 + SMALL_CHAR * words.textContent.length < width;
    words.setAttribute("x", right ? x(at) + 4 : x(at) - 4);
    words.setAttribute("text-anchor", right ? "start" : "end");
  }

  function draw(state) {
    last = state;
    drawCurves(state);
    drawRun(state);
    showTo(at === null ? state.seconds.length : at);
    result.textContent = headline(state);
    announce(verdict(state));
  }

  // At a new width, sims.js has the same state redrawn to fit it.
  function redraw(state) {
    last = state;
    drawCurves(state);
    drawRun(state);
    showTo(at);
  }

  return { draw, resized: { box: pictures, redraw } };
}
