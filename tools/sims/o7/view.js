// The O7 story (Chapter 10), one line at a time: a crash after the
// provider's commit, a redelivery, a changed amount and a late redelivery
// past the provider's key window, each line told and run by Exercise 9's
// own replay_o7(), with what the provider printed while it ran. The switch
// is the chapter's Break It: pay in one request.

import { el } from "../dom.js";

export default function o7(body, { act, announce, tasks }) {
  const story = el("ol", { class: "sim-events" });
  const oneRequest = el("input", { type: "checkbox", id: "o7-one-request" });
  const next = el("button", { type: "button", onclick: () => act("next") }, "Next step of O7");

  body.append(
    el("section", { class: "sim-story" },
      el("div", { class: "sim-controls" }, next,
        el("button", { type: "button", onclick: () => act("reset", oneRequest.checked) },
          "Start O7 over"),
        el("span", { class: "sim-field" },
          el("label", { for: "o7-one-request" }, "Pay in one request "), oneRequest)),
      story),
    tasks);

  function draw(state) {
    story.replaceChildren(...state.steps.map((step) => el("li", {},
      step.time ? `${step.time}: ${step.text}` : step.text,
      step.provider.length ? el("span", { class: "sim-provider" },
        ` (${step.provider.join("; ")})`) : null)));
    next.disabled = state.finished;
    if (state.steps.length) {
      announce(state.steps[state.steps.length - 1].text);
    }
  }

  return { draw };
}
