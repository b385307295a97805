// The killable queue (Chapters 4 and 5): a producer, the jobs table and three
// workers, all tinyq, on a virtual clock. The reader adds jobs, kills and
// restarts workers, sets the lease, and plays or steps time. A picture draws
// the last minute or so: a lane per worker, each claim a bar, the lease left
// a bar that shrinks, the danger zone hatched, kills and duplicates marked.

import { el, player, scrolling, svg } from "../dom.js";

const TICK_MS = 200;                 // how often playing moves the clock
const ANNOUNCED = new Set(["killed", "expired", "takeover", "duplicate", "lost"]);
const reducedMotion = window.matchMedia("(prefers-reduced-motion: reduce)");

function seconds(value) {
  return value === null || value === undefined ? "" : `${value.toFixed(1)} s`;
}

// An address whose domain a narrow table leaves out.
function address(words) {
  const at = words.indexOf("@");
  return at < 0 ? words : [words.slice(0, at), el("span", { class: "kq-wide" }, words.slice(at))];
}

// Who holds a running job, and the lease they have left: "worker 1, 3.0 s
// left", on two lines where the column is narrow.
function held(job) {
  if (job.status !== "running") {
    return "";
  }
  return [el("span", { class: "kq-whole" }, job.holder ?? ""), ", ",
    el("span", { class: "kq-whole" }, `${seconds(job.lease_left)} left`)];
}

// ---- the picture: a lane per worker on a time axis, now near the right edge

const NAMES_WIDTH = 80;          // px: each worker's name and button, left of its lane
const LOOK_BACK = 20;            // s: the least the picture shows of the past
const AHEAD = 84;                // px: the least room right of now, for the lease left,
const MOST_AHEAD = 0.3;          // but never more than this share of the lanes: the past
                                 // is what the reader watches, the future is empty
const PER_SECOND = 21;           // px: the least a second takes, so that a 2 s send
                                 // holds the words "job 1"
const AXIS = 26;                 // px: the time axis above the lanes
const LANE = 58;                 // px: one worker's lane
const BUTTON_TOP = 20;           // px: where its button starts, under its name
const SMALL = 11;                // px: the font of the words on the lanes
const CHAR = 0.62;               // a monospace character's width, in ems
let pictures = 0;                // to give each picture's pattern and clip their own ids

function wordsWidth(text) {
  return text.length * SMALL * CHAR;
}

// Which stretch of time the picture shows, and where a moment goes (x in px).
// For the first 20 s, time 0 is at the left edge and now moves right, like
// a pen on a roll of paper; from then on now stays put, the paper moves
// left, and the picture zooms out until it holds the history's minute. The
// lease ahead keeps room right of now, up to 30% of the lanes. A phone
// holds less of the past (now reaches its place sooner), so that a second
// stays PER_SECOND wide.
function scaleFor(state, width) {
  const left = NAMES_WIDTH;
  const right = width - 6;
  const room = right - left;
  const look = Math.min(Math.max(state.time, LOOK_BACK), state.history.seconds);
  const ahead = state.lease + 1.5;
  const aheadWidth = Math.min(Math.max(ahead * (room / (look + ahead)), AHEAD),
    room * MOST_AHEAD);
  const perSecond = Math.max((room - aheadWidth) / look, PER_SECOND);
  const since = Math.max(state.time - (room - aheadWidth) / perSecond, 0);
  const round = (value) => Math.round(value * 10) / 10;
  const x = (time) => round(left + (time - since) * perSecond);
  return { left, right, perSecond, since, x, now: state.time, nowX: x(state.time) };
}

// The words of a lane's marks, the weightiest first (a kill, a duplicate,
// the lease left), the latest first among equals: each goes right of its
// mark (or a little further right) on the first of its rows with room, else
// left of it, and is left out if there is none (its mark still shows, and
// its title says what it is). So no words cover others, nor a mark's
// shape, even when a kill and a restart fall at the same moment; and none
// is crossed by the now line, nor leaves its mark's side of it: what
// happened stays in the past, left of now.
const PUSHES = [0, 8, 16, 24];

function placeWords(words, heights, taken, scale) {
  const { left, right, nowX } = scale;
  const past = (word) => word.mark < nowX - 0.5;
  const fits = (word, row, from, to) => left <= from && to <= right
    && (to <= nowX || (from >= nowX && !past(word)))
    && taken[row].every(([start, end]) => to <= start || end <= from);
  for (const word of words.sort((a, b) => a.rank - b.rank || b.mark - a.mark)) {
    const width = wordsWidth(word.text);
    const after = PUSHES.map((push) => word.mark + word.gap + push);
    const before = PUSHES.map((push) => word.mark - word.gap - width - push);
    const places = [...word.rows.flatMap((row) => after.map((x) => [row, x])),
      ...word.before.flatMap((row) => before.map((x) => [row, x]))];
    const place = places.find(([row, x]) => fits(word, row, x - 3, x + width + 3));
    if (place) {
      const [row, x] = place;
      taken[row].push([x - 3, x + width + 3]);
      word.into.append(svg("text", { x: x.toFixed(1), y: heights[row], class: "kq-words" },
        word.text));
    }
  }
}

// A warning triangle with its point up, its base centred on x at y.
function triangle(x, y, size) {
  const half = size / 2;
  return svg("polygon", { class: "kq-warning",
    points: `${x},${y - size} ${x + half},${y} ${x - half},${y}` });
}

// A restart: a bracket opening the new life. A kill at the same moment is a
// cross inside it; both show.
function startMark(x, y) {
  return `M${x + 5},${y - 10}H${x}V${y + 10}H${x + 5}`;
}

// Alive and dead stretches of one worker's time in view: [from, to, alive].
function lives(worker, history, since, now) {
  const mine = (list, alive) => list.filter((mark) => mark.worker === worker.index)
    .map((mark) => [mark.time, alive]);
  // At one moment a worker can be killed then restarted, never the other way.
  const marks = [...mine(history.deaths, false), ...mine(history.restarts, true)]
    .sort((a, b) => a[0] - b[0] || Number(a[1]) - Number(b[1]));
  let alive = marks.length ? !marks[0][1] : worker.alive;
  let from = since;
  const stretches = [];
  for (const [time, becomes] of marks) {
    stretches.push([from, time, alive]);
    [from, alive] = [time, becomes];
  }
  stretches.push([from, now, alive]);
  return stretches;
}

function lanePicture(worker, state, scale, ids) {
  const { x, now } = scale;
  const top = laneTop(worker.index);
  const middle = top + 24;
  // Rows of words: over the bars, beside them right of now, under the lease.
  const heights = { above: top + 11, ahead: top + 28, below: top + 54 };
  const words = [];
  const taken = { above: [], ahead: [], below: [] };    // stretches of each row in use
  // A mark scrolled off to the left takes its words with it. gap: the room
  // between the mark and its words, on either side; rows: those the words
  // may take right of the mark, in the order tried; before: those they may
  // take left of it, tried after every place right of it.
  const word = (into, mark, gap, text, rank, rows, before = rows) => mark >= scale.left
    && words.push({ into, mark, gap, text, rank, rows, before });
  const plot = svg("g", { "clip-path": `url(#${ids.clip})` });
  for (const [from, to, alive] of lives(worker, state.history, scale.since, now)) {
    plot.append(svg("line", { class: alive ? "kq-life" : "kq-life kq-dead",
      x1: x(from), x2: x(to), y1: middle, y2: middle }));
  }
  for (const claim of state.history.claims.filter((c) => c.worker === worker.index)) {
    const held = svg("g", { class: "kq-job", "data-job": claim.job });
    const start = x(claim.claimed);
    const end = x(claim.ended ?? now);
    held.append(svg("rect", { class: `kq-claim kq-end-${claim.end ?? "open"}`,
      x: start, y: top + 16, width: Math.max(end - start, 1), height: 16 }));
    if (claim.sent !== null) {
      const sent = x(claim.sent);
      held.append(
        svg("rect", { class: "kq-danger", x: sent, y: top + 16, width: Math.max(end - sent, 1),
          height: 16, fill: `url(#${ids.hatch})` }),
        svg("line", { class: "kq-send", x1: sent, x2: sent, y1: top + 13, y2: top + 35 }));
      if (claim.duplicate) {
        const duplicate = svg("g", { class: "kq-duplicate" },
          svg("title", {}, `a duplicate: job ${claim.job}'s email was sent before`),
          triangle(sent, top + 13, 11));
        word(duplicate, sent, 8, "duplicate", 1, ["above", "below"]);
        taken.above.push([sent - 7, sent + 7]);
        held.append(duplicate);
      }
    }
    if (claim.end === "lost") {
      // Its lease ran out while it worked: its ack came too late and changed nothing.
      held.append(svg("title", {}, `job ${claim.job}: its lease ran out before its ack, ` +
        "so the ack changed nothing"));
      word(held, end, 3, "ack refused", 5, ["above", "below"]);
    }
    const seen = Math.max(start, scale.left);
    const name = [`job ${claim.job}`, String(claim.job)]
      .find((text) => wordsWidth(text) + 6 <= end - seen);
    if (name) {
      held.append(svg("text", { class: "kq-words kq-job-name", x: seen + 3, y: top + 28 }, name));
    }
    // The lease matters while nobody has acknowledged the claim (a dead
    // worker's runs on), and to a worker still at work when it ran out.
    const open = claim.end === null || claim.end === "killed";
    const until = x(claim.lease_until);
    if (claim.end === "killed") {
      // The job stays locked to its dead worker until the lease runs out:
      // the same bar, hollow, from the kill on.
      const to = claim.lease_left > 0 ? now : claim.lease_until;
      held.append(svg("rect", { class: "kq-orphan", x: end, y: top + 16,
        width: Math.max(x(to) - end, 0), height: 16 }));
    }
    if (open || claim.ended > claim.lease_until) {
      held.append(svg("rect", { class: "kq-lease", x: start, y: top + 37,
        width: Math.max(until - start, 1), height: 6 }));
    }
    if (open && claim.lease_left > 0) {
      const from = x(Math.max(now, claim.claimed));
      held.append(svg("rect", { class: "kq-lease-left", x: from, y: top + 37,
        width: Math.max(until - from, 0), height: 6 }));
      word(held, Math.max(from, scale.nowX), 4, `${seconds(claim.lease_left)} left`,
        2, ["ahead"], []);
    } else if (claim.lease_until <= now && (open || claim.ended > claim.lease_until)) {
      const expired = svg("g", { class: "kq-expired" },
        svg("title", {}, `job ${claim.job}'s lease ran out at ${seconds(claim.lease_until)}: ` +
          "another worker may take it; a holder still at work does it too"),
        svg("polygon", { class: "kq-diamond",
        points: `${until},${top + 34} ${until + 5},${top + 40} ${until},${top + 46} ` +
          `${until - 5},${top + 40}` }));
      // Out of the way of a handover's arrow, which leaves the diamond
      // downwards to a worker below, upwards to one above.
      const taker = state.history.claims.find((c) => c.took_over !== null
        && c.job === claim.job && c.took_over.token === claim.token);
      // Left of the diamond, it goes first under the lease bar that ends there.
      word(expired, until, 7, "lease ran out", 3, taker && taker.worker > worker.index
        ? ["above", "below"] : ["below", "above"], ["below", "above"]);
      held.append(expired);
    }
    plot.append(held);
  }
  for (const death of state.history.deaths.filter((d) => d.worker === worker.index)) {
    const at = x(death.time);
    const kill = svg("g", { class: "kq-kill", "data-x": at },
      svg("title", {}, `${worker.name} killed at ${seconds(death.time)}, then dead ` +
        "(dashed) until restarted"),
      svg("path", { class: "kq-cross",
        d: `M${at - 6},${middle - 6}L${at + 6},${middle + 6}M${at - 6},${middle + 6}` +
          `L${at + 6},${middle - 6}` }));
    word(kill, at, 6, "killed", 0, ["above", "below"]);
    taken.ahead.push([at - 7, at + 7]);
    plot.append(kill);
  }
  for (const start of state.history.restarts.filter((r) => r.worker === worker.index)) {
    const at = x(start.time);
    const restart = svg("g", { class: "kq-restart" },
      svg("title", {}, `${worker.name} restarted at ${seconds(start.time)}: ` +
        "a new process that holds nothing"),
      svg("path", { class: "kq-start", d: startMark(at, middle) }));
    word(restart, at, 3, "restarted", 4, ["below", "above"]);
    taken.ahead.push([at - 1, at + 6]);
    plot.append(restart);
  }
  placeWords(words, heights, taken, scale);
  return svg("g", { class: "kq-lane", "data-worker": worker.index },
    svg("line", { class: "kq-lane-edge", x1: 0, x2: scale.right, y1: top + LANE, y2: top + LANE }),
    svg("text", { class: "kq-name", x: 4, y: top + 14 }, worker.name),
    plot);
}

// Where a lane's bar and lease are, from the top of the picture.
const laneTop = (index) => AXIS + index * LANE;

// Each takeover's handover: an arrow from the diamond where the last
// holder's lease ran out, on its lane, to the start of the new claim's bar,
// on the taker's, with its arrowhead on the bar.
function handovers(state, scale) {
  const { x } = scale;
  const drawn = [];
  for (const claim of state.history.claims.filter((c) => c.took_over !== null)) {
    const from = claim.took_over;
    const [x1, x2] = [x(from.lease_until), x(claim.claimed)];
    const down = claim.worker > from.worker;
    const y1 = laneTop(from.worker) + (down ? 46 : 34);
    const y2 = laneTop(claim.worker) + (down ? 16 : 32);
    const bend = (y1 + y2) / 2;
    const head = down ? -6 : 6;            // the arrowhead's back, above or below its point
    const giver = state.workers[from.worker].name;
    const taker = state.workers[claim.worker].name;
    drawn.push(svg("g", { class: "kq-handover", "data-job": claim.job,
      "data-from": from.worker, "data-to": claim.worker },
    svg("title", {}, `job ${claim.job}: ${giver}'s lease ran out at ` +
      `${seconds(from.lease_until)}; ${taker} took it over at ${seconds(claim.claimed)}`),
    svg("path", { class: "kq-arrow", d: `M${x1},${y1}C${x1},${bend} ${x2},${bend} ${x2},${y2 + head}` }),
    svg("polygon", { class: "kq-arrowhead",
      points: `${x2},${y2} ${x2 - 4},${y2 + head} ${x2 + 4},${y2 + head}` })));
  }
  return drawn;
}

function axisPicture(state, scale, height) {
  const { x, nowX, left, right } = scale;
  const axis = svg("g", { class: "kq-axis" },
    svg("rect", { class: "kq-ahead", x: nowX, y: AXIS - 6, width: right - nowX,
      height: height - AXIS + 6 }),
    svg("line", { class: "kq-axis-line", x1: left, x2: right, y1: AXIS - 6, y2: AXIS - 6 }));
  const every = scale.perSecond * 5 >= 50 ? 5 : 10;
  for (let time = Math.ceil(scale.since / every) * every; x(time) < right - 16; time += every) {
    if (Math.abs(nowX - x(time)) < 56) {                // the words "now 12.5 s" are there
      continue;
    }
    axis.append(svg("line", { class: "kq-tick", x1: x(time), x2: x(time), y1: AXIS - 9,
      y2: AXIS - 6 }), svg("text", { class: "kq-words", x: x(time), y: AXIS - 12,
      "text-anchor": "middle" }, `${time} s`));
  }
  axis.append(svg("line", { class: "kq-now", x1: nowX, x2: nowX, y1: AXIS - 10, y2: height }),
    svg("text", { class: "kq-words kq-now-words", x: nowX, y: AXIS - 12, "text-anchor": "middle" },
      `now ${seconds(state.time)}`));
  return axis;
}

// What the picture shows now, in words, for a screen reader.
function describe(state) {
  const leaseOf = (claim) => (claim.lease_left > 0
    ? `job ${claim.job} is leased for ${seconds(claim.lease_left)} more`
    : `job ${claim.job}'s lease ran out`);
  const sentences = [`Now ${seconds(state.time)}.`];
  for (const worker of state.workers) {
    const mine = state.history.claims.filter((claim) => claim.worker === worker.index);
    const killed = mine.filter((claim) => claim.end === "killed").pop();
    const holding = mine.find((claim) => claim.end === null);
    const said = [];
    if (!worker.alive) {
      said.push(`${worker.name} is dead`);
    } else if (!holding) {
      said.push(`${worker.name} is idle`);
    } else {
      said.push(`${worker.name} holds job ${holding.job}, ` + (holding.sent === null
        ? "sending its email" : "its email sent and not yet acknowledged: the danger zone"),
      leaseOf(holding));
    }
    if (killed) {
      said.push(`it was killed at ${seconds(killed.ended)} holding job ${killed.job}, ` +
        (killed.sent === null ? "before sending its email"
          : "after sending its email, before acknowledging it"),
      leaseOf(killed));
    }
    sentences.push(`${said.join("; ")}.`);
  }
  for (const claim of state.history.claims.filter((c) => c.took_over !== null)) {
    const giver = state.workers[claim.took_over.worker].name;
    sentences.push(`${state.workers[claim.worker].name} took job ${claim.job} over at ` +
      `${seconds(claim.claimed)}, after ${giver}'s lease on it ran out at ` +
      `${seconds(claim.took_over.lease_until)}.`);
  }
  const duplicates = state.outbox.filter((email) => email.duplicate).length;
  sentences.push(`The outbox holds ${state.outbox.length} email` +
    `${state.outbox.length === 1 ? "" : "s"}` +
    (duplicates ? `, ${duplicates} of them a duplicate.` : "."));
  return sentences.join(" ");
}

// The picture's key: a small drawing and words for each kind of mark.
function legend(hatch) {
  const key = (drawing, words) => el("li", {},
    svg("svg", { width: 28, height: 16, viewBox: "0 0 28 16", "aria-hidden": "true" }, drawing),
    ` ${words}`);
  const hatched = svg("pattern", { id: hatch, width: 5, height: 5,
    patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" },
  svg("line", { class: "kq-hatch", x1: 0, y1: 0, x2: 0, y2: 5 }));
  return el("ul", { class: "kq-legend" },
    key(svg("rect", { class: "kq-claim", x: 1, y: 3, width: 26, height: 10 }),
      "a job held, claim to ack"),
    key([svg("defs", {}, hatched), svg("rect", { class: "kq-claim", x: 1, y: 3, width: 26,
      height: 10 }), svg("rect", { class: "kq-danger", x: 1, y: 3, width: 26, height: 10,
      fill: `url(#${hatch})` })],
    "sent, not acked: a death here sends it twice"),
    key([svg("rect", { class: "kq-lease", x: 1, y: 5, width: 26, height: 6 }),
      svg("rect", { class: "kq-lease-left", x: 12, y: 5, width: 15, height: 6 })],
    "its lease left"),
    key([svg("rect", { class: "kq-orphan", x: 1, y: 1, width: 14, height: 8 }),
      svg("path", { class: "kq-arrow", d: "M15,5C22,5 22,9 22,11" }),
      svg("polygon", { class: "kq-arrowhead", points: "22,16 18.5,11 25.5,11" })],
    "a dead worker's job, then the worker that takes it over"));
}

export default function killableQueue(body, { act, announce, tasks }) {
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
  const jobs = el("tbody");
  const outbox = el("ol", { class: "sim-outbox" });
  const events = el("ol", { class: "sim-events" });
  pictures += 1;
  const ids = { hatch: `kq-hatch-${pictures}`, clip: `kq-clip-${pictures}`,
    title: `kq-title-${pictures}`, desc: `kq-desc-${pictures}` };
  const picture = svg("svg", { role: "img", "aria-labelledby": ids.title,
    "aria-describedby": ids.desc });
  // Each worker's Kill (or Restart) button, on its lane under its name, so
  // that the reader watches the job and kills its worker in one place.
  const buttons = el("div", { class: "kq-buttons" });
  const frame = el("div", { class: "sim-picture kq-picture" }, picture, buttons);
  let shown = null;                // the state drawn last, drawn again when the width changes
  new ResizeObserver(() => {
    if (shown && Number(picture.getAttribute("width")) !== width()) {
      drawPicture(shown);
    }
  }).observe(frame);
  const hint = el("p", { class: "kq-hint" },
    "Press Play, then kill worker 1 while it holds a job: the same moves give the same run.");
  body.append(controls, hint,
    el("section", {}, el("h3", {}, "The workers over time"), frame, legend(`${ids.hatch}-key`)),
    el("div", { class: "sim-panels" },
      el("section", {}, el("h3", {}, "The jobs table"),
        // Narrow, the email is its name alone (the outbox has it whole).
        scrolling(el("table", { class: "kq-jobs" }, el("thead", {}, el("tr", {},
          el("th", {}, "Job"), el("th", {}, "Email", el("span", { class: "kq-wide" }, " to")),
          el("th", {}, "Status"), el("th", {}, "Attempts"), el("th", {}, "Held by"))), jobs),
        { narrow: true })),
      el("section", {}, el("h3", {}, "Outbox"), outbox),
      el("section", {}, el("h3", {}, "What happened"), events)),
    tasks);

  function width() {
    return Math.max(frame.clientWidth, 300);
  }

  // Redrawn whole at each state, in place: nothing moves between two states,
  // so there is no animation to calm for prefers-reduced-motion.
  function drawPicture(state) {
    shown = state;
    const scale = scaleFor(state, width());
    const height = AXIS + state.workers.length * LANE + 2;
    const look = Math.round(state.time - scale.since);
    const name = `The workers over time: the last ${look} s, up to now, ${seconds(state.time)}, ` +
      "and the leases ahead";
    picture.setAttribute("width", width());
    picture.setAttribute("height", height);
    picture.setAttribute("viewBox", `0 0 ${width()} ${height}`);
    picture.replaceChildren(
      svg("title", { id: ids.title }, name),
      svg("desc", { id: ids.desc }, describe(state)),
      svg("defs", {},
        svg("pattern", { id: ids.hatch, width: 6, height: 6, patternUnits: "userSpaceOnUse",
          patternTransform: "rotate(45)" },
        svg("line", { class: "kq-hatch", x1: 0, y1: 0, x2: 0, y2: 6 })),
        svg("clipPath", { id: ids.clip }, svg("rect", { x: scale.left, y: 0,
          width: scale.right - scale.left, height }))),
      axisPicture(state, scale, height),
      ...state.workers.map((worker) => lanePicture(worker, state, scale, ids)),
      svg("g", { "clip-path": `url(#${ids.clip})` }, handovers(state, scale)));
  }

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
    // A new start like the page's first: as many jobs waiting as there were.
    act("new", { lease: Number(lease.value), jobs: shown?.queued_at_start ?? 0 });
  }

  // A worker's button is made once and then updated, never replaced: a
  // button replaced between a press and its release loses the click, and
  // the focus. It goes on the worker's lane, under its name.
  const made = [];
  function workerButton(worker) {
    if (!made[worker.index]) {
      const button = el("button", { type: "button", class: "kq-act",
        onclick: () => act(button.dataset.action, worker.index) });
      button.style.top = `${AXIS + worker.index * LANE + BUTTON_TOP}px`;
      made[worker.index] = button;
    }
    const button = made[worker.index];
    const action = worker.alive ? "Kill" : "Restart";
    button.dataset.action = action.toLowerCase();
    button.textContent = action;
    button.setAttribute("aria-label", `${action} ${worker.name}`);
    return button;
  }

  function draw(state) {
    clock.textContent = `time ${seconds(state.time)} · lease ${state.lease} s`;
    const ready = state.workers.map(workerButton);
    if (ready.length !== buttons.children.length
        || ready.some((button, index) => buttons.children[index] !== button)) {
      buttons.replaceChildren(...ready);
    }
    jobs.replaceChildren(...state.jobs.map((job) => el("tr", {},
      el("th", { scope: "row" }, String(job.id)), el("td", {}, address(job.address)),
      el("td", {}, job.status), el("td", {}, String(job.attempts)),
      el("td", {}, held(job)))));
    outbox.replaceChildren(...state.outbox.map((email) => el("li",
      { class: email.duplicate ? "duplicate" : "" },
      `job ${email.job} to ${email.address}, sent by ${email.worker}`,
      email.duplicate ? el("strong", {}, " ⚠ duplicate") : null)));
    events.replaceChildren(...state.events.slice(-8).map((event) =>
      el("li", { class: `event-${event.kind}` }, event.text)));
    drawPicture(state);
    const news = state.events.filter((event) => event.n > lastEvent && ANNOUNCED.has(event.kind))
      .map((event) => event.text);
    if (news.length) {
      announce(news.join(". "));
    }
    lastEvent = state.events.length ? state.events[state.events.length - 1].n : lastEvent;
  }

  return { draw };
}
