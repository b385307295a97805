// Small helpers the simulations share for building their pieces of page.

export function el(tag, attributes = {}, ...children) {
  return fill(document.createElement(tag), attributes, children);
}

// The same for the pictures' SVG elements ("svg", "rect", "text", ...), which
// must be made in SVG's namespace to be drawn.
const SVG = "http://www.w3.org/2000/svg";
export function svg(tag, attributes = {}, ...children) {
  return fill(document.createElementNS(SVG, tag), attributes, children);
}

function fill(element, attributes, children) {
  for (const [name, value] of Object.entries(attributes)) {
    if (name.startsWith("on")) {
      element.addEventListener(name.slice(2), value);
    } else if (value !== false && value !== null && value !== undefined) {
      element.setAttribute(name, value === true ? "" : value);
    }
  }
  element.append(...children.flat().filter((child) => child !== null && child !== undefined));
  return element;
}

// A checklist of the tasks an engine reports, ticked when earned.
export function taskList(tasks) {
  return el("ul", { class: "sim-tasks" }, tasks.map((task) =>
    el("li", { class: task.done ? "done" : "", "data-task": task.id },
      el("span", { class: "mark", "aria-hidden": "true" }, task.done ? "✓" : "○"),
      el("span", { class: "visually-hidden" }, task.done ? "Done: " : "To do: "),
      task.text)));
}

// Play and Pause on one button: calls step() every interval() milliseconds
// until finished() says so or the reader presses it again. interval() is
// asked at every tick, so a new speed applies at once. A step is never
// started while the last is still being answered, so that steps never pile
// up behind a slow Python.
const TICK_MS = 50;

export function player(button, interval, step, finished = () => false) {
  const label = button.textContent;
  let timer = null;
  let stepping = null;
  let lastStep = 0;

  function tick() {
    if (finished()) {
      stop();
    } else if (!stepping && performance.now() - lastStep >= interval()) {
      lastStep = performance.now();
      stepping = Promise.resolve(step()).finally(() => { stepping = null; });
    }
  }

  function stop() {
    clearInterval(timer);
    timer = null;
    button.textContent = label;
    button.setAttribute("aria-pressed", "false");
  }

  function start() {
    lastStep = performance.now();
    timer = setInterval(tick, TICK_MS);
    button.textContent = "Pause";
    button.setAttribute("aria-pressed", "true");
  }

  button.setAttribute("aria-pressed", "false");
  button.addEventListener("click", () => (timer ? stop() : start()));
  return { stop };
}

// A table that may be wider than the page: it scrolls sideways, and can be
// focused, so that a keyboard can scroll it too. With `narrow`, a table too
// wide for its box first takes the class sim-narrow, whose rules (the
// view's own) make it narrower: shorter headers, fewer words, turned
// labels. It scrolls, and says so, only if it is still too wide.
export function scrolling(table, { narrow = false } = {}) {
  const box = el("div", { class: "sim-scroll", tabindex: "0" }, table);
  if (narrow) {
    narrowing(box, table);
  }
  return el("div", {}, sideways(box, "table", table), box);
}

// Gives table the class sim-narrow while its wide form is wider than box:
// looked at again whenever either changes size (rows added, a phone turned).
function narrowing(box, table) {
  const fit = () => {
    table.classList.remove("sim-narrow");
    table.classList.toggle("sim-narrow", box.scrollWidth > box.clientWidth);
  };
  const watch = new ResizeObserver(fit);
  watch.observe(box);
  watch.observe(table);
}

// Calls redraw() each time box changes width (a phone turned, a window
// resized), so that a picture drawn to fit one width fits the next.
export function whenWidthChanges(box, redraw) {
  let drawnAt = 0;
  new ResizeObserver(() => {
    if (box.clientWidth !== drawnAt) {
      drawnAt = box.clientWidth;
      redraw();
    }
  }).observe(box);
}

// A line that says so while box is too narrow for what it holds (on a phone,
// say), so that nobody misses what is off to the side. content: what grows.
export function sideways(box, what, content = box) {
  const note = el("p", { class: "sim-sideways", hidden: true },
    `This ${what} is wider than the page: scroll it sideways to see the rest.`);
  const check = () => { note.hidden = box.scrollWidth <= box.clientWidth; };
  const watch = new ResizeObserver(check);
  watch.observe(box);
  watch.observe(content);
  return note;
}
