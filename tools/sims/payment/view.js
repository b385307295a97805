// The payment simulator (Chapters 6 to 8): a worker charges Alice through
// a flaky bank, with the retry policy and the key mode the reader sets.
// Up front only the keys and the moves; the rest of the settings under
// More settings. One line says what the bank took against what Alice owes.
// Two pictures: what Alice owes and what the bank took, as two bars; and
// every attempt on a time axis, one lane per charge job, with the backoff
// waits between. A table sets what the worker knows of each job beside
// what the bank did. (Chapter 10's O7 story is o7.js.)

import { el, player, scrolling, sideways, svg } from "../dom.js";
import { many } from "../picture.js";

const STEP_MS = 500;

function dollars(cents) {
  return `$${(cents / 100).toFixed(2)}`;
}

function seconds(value) {
  return `${value.toFixed(2)} s`;
}

// ---- the marks: one shape per thing that can become of an attempt

// What each attempt's mark says in words, under it and in the legend.
function label(entry) {
  if (entry.event === "lost request") {
    return "request lost";
  }
  if (entry.event === "lost reply") {
    return "reply lost";
  }
  return entry.charged ? "charged" : "key seen";
}

// The mark for one attempt, centred on (x, y): filled when the bank took
// $10 in it, hollow when it took nothing; a cross when the request never
// reached the bank, a broken arc when the reply never came back, a tick
// when the worker saw the bank's approval.
const R = 7;
function glyph(x, y, event, took) {
  const parts = [svg("circle", { cx: x, cy: y, r: R,
    class: took ? "pay-dot pay-took" : "pay-dot pay-none" })];
  if (event === "lost request") {
    const d = R * 0.75;
    parts.push(svg("path", { class: "pay-cross",
      d: `M${x - d} ${y - d}L${x + d} ${y + d}M${x + d} ${y - d}L${x - d} ${y + d}` }));
  } else if (event === "lost reply") {
    // The reply's way back over the top, broken in the middle.
    parts.push(svg("path", { class: "pay-broken",
      d: `M${x + R + 3} ${y - 1}A${R + 3} ${R + 3} 0 0 0 ${x + 2} ${y - R - 3}` +
         `M${x - 3} ${y - R - 3}A${R + 3} ${R + 3} 0 0 0 ${x - R - 3} ${y - 1}` +
         `l-2 -4m2 4l3 -3` }));
  } else {
    parts.push(svg("path", { class: took ? "pay-tick pay-on-took" : "pay-tick",
      d: `M${x - 4} ${y}l3 3.5l5 -7` }));
  }
  return parts;
}

// A few points on the clock that fall at least `room` pixels apart.
function ticks(span, perSecond, room = 64) {
  const steps = [0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600];
  const step = steps.find((each) => each * perSecond >= room) || steps[steps.length - 1];
  const found = [];
  for (let t = 0; t <= span + 1e-9; t += step) {
    found.push(Math.round(t * 100) / 100);
  }
  return found;
}

function statusOf(job, state) {
  const charged = job.charged_times === 0 ? "nothing taken" :
    job.charged_times === 1 ? "charged once" :
    job.charged_times === 2 ? "⚠ charged twice" : `⚠ charged ${job.charged_times} times`;
  if (job.status === "done") {
    return `✓ done · ${charged}`;
  }
  if (job.status === "dead") {
    return `✗ dead · ${charged}`;
  }
  const last = state.timeline.filter((entry) => entry.job === job.id).pop();
  if (!last) {
    return "waiting its turn";
  }
  const when = last.retry_at > state.time ? `retry at ${seconds(last.retry_at)}`
    : `due since ${seconds(last.retry_at)}`;
  return when +
    (job.charged_times ? ` · ${charged}, pending` : "");
}

// How many times the bank charged an order, in the table: "⚠ twice".
function bankCharged(times) {
  const words = times === 0 ? "never" : times === 1 ? "once" : times === 2 ? "twice"
    : `${times} times`;
  return times > 1 ? `⚠ ${words}` : words;
}

// What the worker can tell from its own log of a job, in a few words: a
// timeout may have charged, a lost request did not, and with a stable key
// the bank charges an order once at most. (The engine's worker_knows says
// it in a sentence, which the cell keeps as its title.)
function knows(job, state) {
  const mine = state.timeline.filter((entry) => entry.job === job.id);
  if (mine.length === 0) {
    return "not tried yet";
  }
  const timeouts = mine.filter((entry) => entry.event === "lost reply").length;
  const keyed = state.settings.keys === "stable";
  if (job.status === "done") {
    return timeouts === 0 ? "charged once" : keyed ? "charged once (the key)"
      : `charged, maybe more (${many(timeouts, "timeout")})`;
  }
  const where = job.status === "dead" ? "dead" : "retrying";
  return timeouts === 0 ? `${where}, not charged` : keyed ? `${where}, maybe charged once (the key)`
    : `${where}, maybe charged (${many(timeouts, "timeout")})`;
}

// The line over the pictures: what Alice owes against what the bank took,
// and the difference as a sum; the dead letters, if any.
function headline(state) {
  if (state.timeline.length === 0) {
    return [`${many(state.jobs.length, "order")} to charge; none tried yet`, "", ""];
  }
  const owes = `Alice owes ${dollars(state.expected_cents)}`;
  const verdict = state.actual_cents === 0 ? "nothing" :
    state.actual_cents === state.expected_cents ? "exactly that" :
    [state.more_cents > 0 && `${dollars(state.more_cents)} too much`,
      state.pending_cents > 0 && `${dollars(state.pending_cents)} pending`]
      .filter(Boolean).join(", ");
  const took = state.actual_cents === state.expected_cents ? "; the bank took " :
    `; the bank took ${dollars(state.actual_cents)}: `;
  const dead = state.jobs.filter((job) => job.status === "dead").length;
  return [owes + took, verdict, dead ? ` · ${many(dead, "dead letter")}` : ""];
}

export default function payment(body, { act, announce, tasks }) {
  let finished = false;
  const inputs = {
    lost_request: el("input", { type: "range", min: "0", max: "0.5", step: "0.05", value: "0.3",
      id: "pay-lost-request" }),
    lost_reply: el("input", { type: "range", min: "0", max: "0.5", step: "0.05", value: "0.3",
      id: "pay-lost-reply" }),
    attempts: el("input", { type: "number", min: "1", max: "10", value: "5", id: "pay-attempts" }),
    // A box's step counts from its min: 0.5 and 8 must be steps from it.
    base: el("input", { type: "number", min: "0.1", max: "60", step: "0.1", value: "0.5",
      id: "pay-base" }),
    cap: el("input", { type: "number", min: "1", max: "3600", step: "1", value: "8",
      id: "pay-cap" }),
    charges: el("input", { type: "number", min: "1", max: "20", value: "5", id: "pay-charges" }),
    seed: el("input", { type: "number", min: "0", value: "1", id: "pay-seed" }),
    jitter: el("input", { type: "checkbox", checked: true, id: "pay-jitter" }),
  };
  const keys = el("select", { id: "pay-keys", onchange: () => configure() },
    el("option", { value: "none" }, "no key"),
    el("option", { value: "fresh" }, "a fresh key per attempt"),
    el("option", { value: "stable" }, "a stable key per order"));
  // A changed control starts the charges afresh with it, so that what the
  // page shows is always what the controls say.
  for (const input of Object.values(inputs)) {
    input.addEventListener("change", () => configure());
  }
  const shownPercent = {
    lost_request: el("output", { for: "pay-lost-request" }),
    lost_reply: el("output", { for: "pay-lost-reply" }),
  };
  const play = el("button", { type: "button" }, "Play");
  const speed = el("select", { id: "pay-speed" },
    el("option", { value: "1" }, "1×"), el("option", { value: "4" }, "4×"));
  // The one line over the pictures, and after it, for a screen reader, the
  // engine's words order by order (also at the head of every attempt's words).
  const balance = el("p", { class: "sim-result pay-headline" });
  const why = el("p", { class: "pay-why" });
  const timeline = el("ol", { class: "sim-events" });
  const bars = svg("svg", { class: "pay-bars", role: "img" });
  const lanes = svg("svg", { class: "pay-timeline", role: "img" });
  const lanesBox = el("div", { class: "sim-scroll pay-scroll", tabindex: "0" }, lanes);
  const pictures = el("div", { class: "sim-picture" }, bars);
  const jobs = el("tbody");
  const modes = el("div", { class: "pay-modes" });
  let compared = null;         // the settings, but the key mode, that modes shows
  let shown = null;            // the state drawn last

  const playing = player(play, () => STEP_MS / Number(speed.value), () => act("step"),
    () => finished);

  function labelled(id, text, input, extra = null) {
    return el("span", { class: "sim-field" }, el("label", { for: id }, text), input, extra);
  }

  // Up front, what the lesson needs: the keys, and the moves. The rest
  // (the bank's luck, the retry policy, the run's size and seed, the speed)
  // waits under More settings.
  const seenKey = legendKey("approved", false, "key seen, no charge");
  body.append(
    el("div", { class: "sim-controls" },
      labelled("pay-keys", "Keys ", keys),
      el("button", { type: "button", onclick: () => configure("run") }, "Run all charges"),
      play,
      el("button", { type: "button", onclick: () => act("step") }, "Step one attempt"),
      el("button", { type: "button", onclick: () => configure() }, "Reset")),
    el("details", { class: "pay-more" },
      el("summary", {}, "More settings"),
      el("div", { class: "sim-controls" },
        labelled("pay-lost-request", "Lost requests ", inputs.lost_request,
          shownPercent.lost_request),
        labelled("pay-lost-reply", "Lost replies ", inputs.lost_reply,
          shownPercent.lost_reply)),
      el("div", { class: "sim-controls" },
        labelled("pay-attempts", "Attempts ", inputs.attempts),
        labelled("pay-base", "Base (s) ", inputs.base),
        labelled("pay-cap", "Cap (s) ", inputs.cap),
        labelled("pay-jitter", "Jitter ", inputs.jitter)),
      el("div", { class: "sim-controls" },
        labelled("pay-charges", "Charges ", inputs.charges),
        labelled("pay-seed", "Seed ", inputs.seed),
        el("button", { type: "button", onclick: newSeed }, "New seed"),
        labelled("pay-speed", "Speed ", speed))),
    balance,
    pictures,
    el("section", { class: "sim-picture" }, el("h3", {}, "Attempts and waits"),
      sideways(lanesBox, "picture", lanes), lanesBox,
      el("p", { class: "pay-legend" },
        legendKey("approved", true, "charged"),
        legendKey("lost reply", true, "reply lost, but charged"),
        legendKey("lost request", false, "request lost"),
        seenKey,
        el("span", { class: "pay-key" },
          svg("svg", { width: "26", height: "22", viewBox: "0 -11 26 22", "aria-hidden": "true" },
            svg("line", { class: "pay-wait-line", x1: "2", x2: "24", y1: "0", y2: "0" })),
          "backoff wait"))),
    el("section", {}, el("h3", {}, "The three key modes, same seed"),
      el("button", { type: "button", onclick: compareModes }, "Run all three"), modes),
    el("div", { class: "sim-panels" },
      el("section", { class: "wide" }, el("h3", {}, "The charge jobs"),
        scrolling(el("table", { class: "pay-jobs" },
          el("thead", {}, el("tr", {},
            ...["Job", "The worker knows", "The bank charged"].map((name) =>
              el("th", { scope: "col" }, name)))), jobs))),
      el("details", { class: "wide" },
        el("summary", {}, "Every attempt in words"), why, timeline)),
    tasks);

  function settings() {
    return {
      lost_request: Number(inputs.lost_request.value),
      lost_reply: Number(inputs.lost_reply.value),
      attempts: Number(inputs.attempts.value),
      base: Number(inputs.base.value),
      cap: Number(inputs.cap.value),
      charges: Number(inputs.charges.value),
      seed: Number(inputs.seed.value),
      jitter: inputs.jitter.checked,
      keys: keys.value,
    };
  }

  // Apply the controls (which starts the charges afresh), then maybe run.
  async function configure(then) {
    const wrong = Object.values(inputs).find((input) => !input.checkValidity());
    if (wrong) {
      wrong.closest("details").open = true;   // where the browser can point at it
      wrong.reportValidity();          // the browser says what the box takes
      return;
    }
    playing.stop();
    await act("configure", settings());
    if (then) {
      await act(then);
    }
  }

  function newSeed() {
    inputs.seed.value = String(Number(inputs.seed.value) + 1);
    configure();
  }

  // One mark of the legend and its few words.
  function legendKey(event, took, words) {
    return el("span", { class: "pay-key" },
      svg("svg", { width: "26", height: "22", viewBox: "-13 -12 26 22", "aria-hidden": "true" },
        glyph(0, 0, event, took)), words);
  }

  // What Alice owes (the orders done) against what the bank took, split into
  // what she owes, what is pending (charged while the job still retries) and
  // what is more (hatched).
  function drawBars(state) {
    const width = Math.max(280, pictures.clientWidth || 600);
    const name = 96, amount = 64, area = width - name - amount - 8;
    const full = Math.max(state.orders_cents, state.actual_cents, 1);
    const x = (cents) => name + (area * cents) / full;
    const rows = { expected: 22, actual: 62 };
    const parts = [];
    const bar = (which, words, total, pieces) => svg("g", { "data-bar": which },
      svg("text", { x: 0, y: rows[which] + 12 }, words),
      svg("rect", { class: "pay-track", x: name, y: rows[which], width: area, height: 16 }),
      pieces.filter(([, cents]) => cents > 0).map(([part, cents, from]) => svg("rect", {
        "data-part": part, class: `pay-${part}`, x: x(from), y: rows[which],
        width: x(from + cents) - x(from), height: 16,
        fill: { more: "url(#pay-hatch)", pending: "url(#pay-dots)" }[part] })),
      svg("text", { class: "pay-amount", x: x(total) + 6, y: rows[which] + 12 }, dollars(total)),
      which === "actual" ? parts : null);
    const owed = state.expected_cents;
    let y = rows.actual + 32;
    for (const [part, words] of [["pending", "pending: taken while its job still retries (dotted)"],
      ["more", "more than she owes (hatched)"]]) {
      const cents = state[`${part}_cents`];
      if (cents > 0) {
        // As many lines as the width needs (a phone's is narrow): 6.7 px a
        // character of the 11 px monospace font.
        const fits = Math.floor((width - name) / 6.7);
        const lines = [];
        for (const word of `${dollars(cents)} ${words}`.split(" ")) {
          const line = lines.length ? `${lines[lines.length - 1]} ${word}` : word;
          if (lines.length && line.length <= fits) {
            lines[lines.length - 1] = line;
          } else {
            lines.push(word);
          }
        }
        parts.push(svg("text", { class: "pay-part-label", "data-label": part, x: name, y },
          lines.map((line, i) => svg("tspan", { x: name, dy: i ? 14 : 0 },
            i < lines.length - 1 ? `${line} ` : line))));
        y += 14 * lines.length + 2;
      }
    }
    const orders = x(state.orders_cents);
    const ordersSaid = `all ${state.settings.charges} orders: ${dollars(state.orders_cents)}`;
    bars.replaceChildren(
      svg("desc", {}, `The dashed line marks all ${state.settings.charges} orders, ` +
        `${dollars(state.orders_cents)}. Solid: what she owes; dotted: pending; hatched: more.`),
      svg("defs", {},
        svg("pattern", { id: "pay-hatch", width: "6", height: "6", patternUnits: "userSpaceOnUse",
          patternTransform: "rotate(45)" },
          svg("rect", { class: "pay-hatch-ground", width: "6", height: "6" }),
          svg("line", { class: "pay-hatch-line", x1: "0", y1: "0", x2: "0", y2: "6" })),
        svg("pattern", { id: "pay-dots", width: "5", height: "5", patternUnits: "userSpaceOnUse" },
          svg("circle", { class: "pay-dot-fill", cx: "2.5", cy: "2.5", r: "1" }))),
      svg("line", { class: "pay-orders", x1: orders, x2: orders, y1: 14, y2: rows.actual + 22 }),
      // Its words end at the line, unless that would push them off the left.
      svg("text", { class: "pay-orders-label", y: 10, "text-anchor": "end",
        x: Math.min(Math.max(orders, ordersSaid.length * 6.7 + 2), width - 4) }, ordersSaid),
      bar("expected", "She owes", owed, [["owed", owed, 0]]),
      bar("actual", "Bank took", state.actual_cents, [["owed", owed, 0],
        ["pending", state.pending_cents, owed],
        ["more", state.more_cents, owed + state.pending_cents]]));
    bars.setAttribute("width", width);
    bars.setAttribute("height", y);
    bars.setAttribute("viewBox", `0 0 ${width} ${y}`);
    const split = [state.expected_cents && `${dollars(state.expected_cents)} owed`,
      state.pending_cents && `${dollars(state.pending_cents)} pending`,
      state.more_cents && `${dollars(state.more_cents)} more than she owes`].filter(Boolean);
    bars.setAttribute("aria-label", `Two bars. Alice owes ${dollars(owed)} for the orders ` +
      `done; the bank took ${dollars(state.actual_cents)}` +
      (split.length > 1 || state.expected_cents !== state.actual_cents
        ? `: ${split.join(", ")}.` : "."));
  }

  // Every attempt on one time axis: a lane per job, each attempt a mark at
  // its time, each backoff wait a thin line as long as it lasts.
  function drawLanes(state) {
    const entries = state.timeline;
    const said = state.jobs.map((job) => statusOf(job, state));
    // 7.3 px a character of the 12 px monospace font, and some room. Where
    // there is little room (a phone), each lane has a heading line, its job
    // and its status, rather than a column on either side, so that both are
    // seen without scrolling.
    const room = Math.max(280, lanesBox.clientWidth || 600);
    const narrow = room < 560;
    const heading = (job, row) => (narrow ? `job ${job.id} · ${said[row]}` : said[row]);
    const longest = (narrow ? 6.7 : 7.3) *     // the heading's font is 11 px
      Math.max(...state.jobs.map((job, row) => heading(job, row).length));
    const lane = narrow ? 74 : 58, top = 34, first = narrow ? 40 : 20;
    const name = narrow ? 24 : 54, status = narrow ? 4 : 12 + 24 + longest;
    const span = Math.max(1, state.time,
      ...entries.map((entry) => entry.retry_at ?? entry.end));
    // Room for the words under the marks: two rows of them, taking turns,
    // so that two attempts of one job must be some 40 px apart at least.
    let closest = Infinity;
    for (const job of state.jobs) {
      const mine = entries.filter((entry) => entry.job === job.id);
      mine.slice(1).forEach((entry, i) => { closest = Math.min(closest, entry.t - mine[i].t); });
    }
    // Past the axis's end, room for the word "now" and the words under a
    // last mark (the widest, "request lost", is some 40 px).
    const tail = 44;
    const fit = (room - name - 8 - tail - status) / span;
    const perSecond = Math.min(Math.max(fit, 40 / closest, 60), 6000 / span);
    const x = (t) => name + 8 + t * perSecond;
    const markAt = (entry) => Math.max(x(entry.t) + R, (x(entry.t) + x(entry.end)) / 2);
    // The right edge of what is drawn: the axis and the words of its last
    // tick (6.7 px a character at 11 px), the word "now", and the words
    // under the last marks (6.2 px a character at 10 px).
    const marked = ticks(span, perSecond);
    const last = marked[marked.length - 1];
    const right = Math.max(x(span), x(last) + `${last} s`.length * 3.4 + 2,
      x(state.time) + 26,
      ...entries.map((entry) => markAt(entry) + label(entry).length * 3.1 + 2));
    const width = narrow ? Math.max(right, longest) + status : right + status;
    const height = top + lane * state.jobs.length + first - 16;
    const axis = svg("g", { class: "pay-axis" },
      svg("line", { x1: x(0), x2: x(span), y1: top - 8, y2: top - 8 }),
      marked.map((t) => svg("g", {},
        svg("line", { x1: x(t), x2: x(t), y1: top - 12, y2: top - 4 }),
        svg("text", { x: x(t), y: top - 16, "text-anchor": "middle" }, `${t} s`))),
      svg("line", { class: "pay-now", x1: x(state.time), x2: x(state.time), y1: top - 8,
        y2: height }),
      svg("text", { class: "pay-now-label", x: x(state.time) + 3, y: height - 2 }, "now"));
    const newest = entries[entries.length - 1];
    const rows = state.jobs.map((job, row) => {
      const y = top + lane * row + first;
      const mine = entries.filter((entry) => entry.job === job.id);
      let free = -Infinity;       // where this lane's last wait label ends
      return svg("g", { class: `pay-lane pay-${job.status}`, "data-job": job.id },
        svg("line", { class: "pay-lane-line", x1: x(0), x2: x(span), y1: y, y2: y }),
        narrow ? null : svg("text", { x: 0, y: y + 4 }, `job ${job.id}`),
        mine.map((entry, i) => {
          const at = markAt(entry);
          const words = `attempt ${entry.attempt} at ${seconds(entry.t)}: ${label(entry)}; ` +
            entry.bank;
          const marks = [svg("g", { class: "pay-attempt" + (entry === newest ? " pay-new" : ""),
            "data-event": entry.event, "data-charged": String(entry.charged) },
            svg("title", {}, words),
            svg("line", { class: "pay-flight", x1: x(entry.t), x2: x(entry.end), y1: y, y2: y }),
            glyph(at, y, entry.event, entry.charged),
            svg("text", { class: "pay-label", x: at, y: y + (i % 2 ? 32 : 21),
              "text-anchor": "middle" }, label(entry)))];
          if (entry.retry_at !== null) {
            const from = x(entry.end), to = x(entry.retry_at);
            const text = seconds(entry.wait);
            // Its length over the line, unless the last one is still there.
            const half = (text.length * 6.2) / 2, middle = (from + to) / 2;
            const room = middle - half >= free + 4;
            if (room) {
              free = middle + half;
            }
            marks.push(svg("g", { class: "pay-wait" },
              svg("title", {}, `waits ${text}, then tries again`),
              svg("line", { class: "pay-wait-line", x1: from, x2: to, y1: y, y2: y }),
              svg("line", { class: "pay-wait-end", x1: to, x2: to, y1: y - 4, y2: y + 4 }),
              room ? svg("text", { class: "pay-wait-label", x: middle, y: y - 12,
                "text-anchor": "middle" }, text) : null));
          }
          return marks;
        }).flat(),
        svg("text", { class: narrow ? "pay-status pay-heading" : "pay-status",
          x: narrow ? 0 : right + 12,
          y: narrow ? y - 26 : y + 4 }, heading(job, row)));
    });
    // For a screen reader, the same lanes in words.
    const told = state.jobs.map((job, row) => {
      const tries = entries.filter((entry) => entry.job === job.id).map((entry) =>
        `${label(entry)} at ${seconds(entry.t)}` +
        (entry.retry_at === null ? "" : `, a wait of ${seconds(entry.wait)}`));
      return `Job ${job.id}: ${tries.length ? tries.join("; ") : "not tried yet"}; ` +
        `${said[row].replace(/[✓✗⚠] ?/g, "").replace(" · ", ", ")}.`;
    });
    lanes.replaceChildren(svg("desc", {}, told.join(" ")), axis, ...rows);
    lanes.setAttribute("width", Math.ceil(width));
    lanes.setAttribute("height", height);
    lanes.setAttribute("viewBox", `0 0 ${Math.ceil(width)} ${height}`);
    const count = (event) => entries.filter((entry) => entry.event === event).length;
    lanes.setAttribute("aria-label", entries.length === 0
      ? `Attempts on a time axis: none yet; ${many(state.jobs.length, "charge job")} ` +
        "waiting."
      : `Attempts on a time axis, now at ${seconds(state.time)}: ` +
        `${many(entries.length, "attempt")}, ${many(count("lost request"), "request")} lost, ` +
        `${many(count("lost reply"), "reply", "replies")} lost. ` +
        `Latest: job ${newest.job}, attempt ${newest.attempt}: ${label(newest)}` +
        (newest.retry_at !== null ? `, then a wait of ${seconds(newest.wait)}.` : "."));
  }

  // The same settings and seed under each key mode, side by side, run to
  // the end by the engine without touching the run shown above. A table
  // for settings that have changed since is taken away.
  const unkeyed = (values) => JSON.stringify({ ...values, keys: null });
  async function compareModes() {
    const rows = await act("compare_keys");
    if (!rows) {
      return;
    }
    compared = unkeyed(shown.settings);      // drawn with the answer: what was compared
    const named = Object.fromEntries([...keys.options].map((option) =>
      [option.value, option.textContent]));
    modes.replaceChildren(scrolling(el("table", { class: "pay-compare" },
      el("thead", {}, el("tr", {}, ...["Keys", "Alice owed", "Alice paid",
        "Taken again for one order", "Dead jobs"].map((name) => el("th", { scope: "col" }, name)))),
      el("tbody", {}, ...rows.map((row) => el("tr", { "data-keys": row.keys },
        el("th", { scope: "row" }, named[row.keys]),
        el("td", {}, dollars(row.expected_cents)),
        el("td", {}, dollars(row.actual_cents)),
        el("td", {}, row.overcharge_cents ? `⚠ ${dollars(row.overcharge_cents)}` : "none"),
        el("td", {}, String(row.dead))))))));
    announce(rows.map((row) => `${named[row.keys]}: Alice paid ${dollars(row.actual_cents)} ` +
      `of ${dollars(row.expected_cents)} owed`).join("; ") + ".");
  }

  function draw(state) {
    shown = state;
    if (compared !== null && unkeyed(state.settings) !== compared) {
      compared = null;
      modes.replaceChildren();
    }
    drawBars(state);
    drawLanes(state);
    finished = state.finished;
    for (const name of ["lost_request", "lost_reply"]) {
      shownPercent[name].textContent = ` ${Math.round(state.settings[name] * 100)}%`;
    }
    const [lead, verdict, dead] = headline(state);
    const words = state.timeline.length ? `${state.difference}.` : "";
    balance.replaceChildren(
      el("span", { class: "pay-said" }, lead, verdict ? el("strong", {}, verdict) : null, dead),
      ...(words ? [el("span", { class: "visually-hidden" }, `. ${words}`)] : []));
    why.textContent = words;
    why.hidden = !words;
    seenKey.hidden = state.settings.keys !== "stable";    // only a stable key is seen again
    jobs.replaceChildren(...state.jobs.map((job) => el("tr",
      { class: job.status === "dead" ? "dead" : "" },
      el("th", { scope: "row" }, String(job.id)),
      el("td", { title: job.worker_knows }, knows(job, state)),
      el("td", {}, bankCharged(job.charged_times)))));
    timeline.replaceChildren(...state.timeline.map((entry) => el("li",
      { class: `event-${entry.outcome}` }, `${entry.t.toFixed(2)} s: ${entry.text}`)));
    if (state.finished) {
      announce(`${lead}${verdict}${dead}. ${words}`);
    }
  }

  // At a new width, sims.js has the same state redrawn to fit it.
  function redraw(state) {
    drawBars(state);
    drawLanes(state);
  }

  return { draw, resized: { box: pictures, redraw } };
}
