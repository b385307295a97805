// The crash-timing explorer (Chapters 5 to 8): one job's life, a crash at a
// moment the reader picks, under a protection the reader picks, then the
// recovery; and the matrix of every moment against every protection, each
// cell run for real.

import { el, player, scrolling, taskList } from "../dom.js";

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

export default function crashTiming(body, { act, announce }) {
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
  const tasks = el("div");
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
    detail,
    el("div", { class: "sim-panels" },
      el("section", { class: "wide" },
        el("h3", {}, "What happened"), timeline, outcome)),
    matrix,
    el("section", {}, el("h3", {}, "Try to"), tasks));

  const ran = () => Boolean(state && state.outcome);   // the choice made has been run
  const playing = player(play, () => STEP_MS / Number(speed.value), step,
    () => ran() && shown >= state.timeline.length);

  function options(select, items, chosen) {
    select.replaceChildren(...items.map((item) =>
      el("option", { value: item.id, selected: item.id === chosen }, item.label)));
  }

  function choose() {
    playing.stop();
    act("choose", protection.value, crash.value);
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

  function showAll() {
    playing.stop();
    shown = ran() ? state.timeline.length : 0;
    reveal();
  }

  // The timeline up to the step reached; the outcome once it is all shown.
  function reveal() {
    const steps = state ? state.timeline.slice(0, shown) : [];
    timeline.replaceChildren(...steps.map((entry) => el("li", { class: `event-${entry.kind}` },
      `${entry.t.toFixed(1)} s, ${entry.who}: ${entry.what}`)));
    const done = state && state.outcome && shown >= state.timeline.length;
    outcome.textContent = done ? `Outcome: ${outcomeText(state.outcome, state.effects)}` : "";
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

  function draw(newState) {
    state = newState;
    options(protection, state.protections, state.protection);
    options(crash, state.crash_points, state.crash);
    const point = state.crash_points.find((item) => item.id === state.crash);
    detail.textContent = `In this protection's code: ${point.detail}.`;
    tasks.replaceChildren(taskList(state.tasks));
    if (shown > state.timeline.length || !state.outcome) {
      shown = 0;
    }
    reveal();
  }

  // The page opens on no crash: the engine's own default, a crash after the
  // effect, would answer the first task before the reader chose anything.
  return { draw, options: { crash: "none" } };
}
