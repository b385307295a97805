// The payment simulator (Chapters 6 to 8): a worker charges Alice through
// a flaky bank, with the retry policy and the key mode the reader sets;
// expected and actual balance side by side. (Chapter 10's O7 story is
// o7.js.)

import { el, player, scrolling, taskList } from "../dom.js";

const STEP_MS = 500;

function dollars(cents) {
  return `$${(cents / 100).toFixed(2)}`;
}

export default function payment(body, { act, announce }) {
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
  const speed = el("select", { "aria-label": "Speed" },
    el("option", { value: "1" }, "1×"), el("option", { value: "4" }, "4×"));
  const balance = el("p", { class: "sim-result" });
  const timeline = el("ol", { class: "sim-events" });
  const jobs = el("tbody");
  const tasks = el("div");

  const playing = player(play, () => STEP_MS / Number(speed.value), () => act("step"),
    () => finished);

  function labelled(id, text, input, extra = null) {
    return el("span", { class: "sim-field" }, el("label", { for: id }, text), input, extra);
  }

  body.append(
    el("div", { class: "sim-controls" },
      labelled("pay-lost-request", "Lost requests ", inputs.lost_request,
        shownPercent.lost_request),
      labelled("pay-lost-reply", "Lost replies ", inputs.lost_reply, shownPercent.lost_reply),
      labelled("pay-keys", "Keys ", keys),
      labelled("pay-attempts", "Attempts ", inputs.attempts),
      labelled("pay-base", "Base (s) ", inputs.base),
      labelled("pay-cap", "Cap (s) ", inputs.cap),
      labelled("pay-jitter", "Jitter ", inputs.jitter),
      labelled("pay-charges", "Charges ", inputs.charges),
      labelled("pay-seed", "Seed ", inputs.seed)),
    el("div", { class: "sim-controls" },
      el("button", { type: "button", onclick: () => configure("run") }, "Run all charges"),
      play,
      el("button", { type: "button", onclick: () => act("step") }, "Step one attempt"),
      el("label", {}, "Speed ", speed),
      el("button", { type: "button", onclick: () => configure() }, "Reset"),
      el("button", { type: "button", onclick: newSeed }, "New seed")),
    balance,
    el("div", { class: "sim-panels" },
      el("section", { class: "wide" }, el("h3", {}, "The charge jobs"),
        scrolling(el("table", {}, el("thead", {}, el("tr", {},
          el("th", {}, "Job"), el("th", {}, "Status"), el("th", {}, "Tries"),
          el("th", {}, "The bank charged"), el("th", {}, "The worker knows"))), jobs))),
      el("section", { class: "wide" },
        el("h3", {}, "Attempts and waits"), timeline)),
    el("section", {}, el("h3", {}, "Try to"), tasks));

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

  function draw(state) {
    finished = state.finished;
    for (const name of ["lost_request", "lost_reply"]) {
      shownPercent[name].textContent = ` ${Math.round(state.settings[name] * 100)}%`;
    }
    balance.textContent = `Alice should have paid ${dollars(state.expected_cents)}; ` +
      `she has paid ${dollars(state.actual_cents)}. ${state.difference}`;
    jobs.replaceChildren(...state.jobs.map((job) => el("tr",
      { class: job.status === "dead" ? "dead" : "" },
      el("th", { scope: "row" }, String(job.id)),
      el("td", {}, job.status === "dead" ? "✗ dead" : job.status),
      el("td", {}, String(job.attempts)),
      el("td", {}, job.charged_times > 1 ? `⚠ ${job.truth}` : job.truth),
      el("td", {}, job.worker_knows))));
    timeline.replaceChildren(...state.timeline.slice(-12).map((entry) => el("li",
      { class: `event-${entry.outcome}` }, `${entry.t.toFixed(2)} s: ${entry.text}`)));
    tasks.replaceChildren(taskList(state.tasks));
    if (state.finished) {
      announce(balance.textContent);
    }
  }

  return { draw, options: {} };
}
