// Small comforts for reading: the theme toggle, the contents menu on narrow
// screens, headings that land clear of the header, search, the current
// section marked in the contents, answers unfolded for printing, and the
// site kept for reading offline.

const root = document.documentElement;
const systemDark = window.matchMedia("(prefers-color-scheme: dark)");

function currentTheme() {
  return root.dataset.theme || (systemDark.matches ? "dark" : "light");
}

function showTheme(button) {
  const dark = currentTheme() === "dark";
  button.setAttribute("aria-pressed", String(dark));
  button.textContent = "Dark theme";
}

function setUpThemeToggle() {
  const button = document.querySelector(".theme-toggle");
  showTheme(button);
  button.addEventListener("click", () => {
    const next = currentTheme() === "dark" ? "light" : "dark";
    root.dataset.theme = next;
    try {
      localStorage.setItem("theme", next);
    } catch (e) {
      // Not remembered, but still switched for this page.
    }
    showTheme(button);
  });
  systemDark.addEventListener("change", () => showTheme(button));
}

// On a phone the contents are a menu over the page: a link followed from it
// shows where it leads, and Escape puts it away, back to its button.
function setUpContentsMenu() {
  const button = document.querySelector(".toc-toggle");
  const toc = document.getElementById("toc");
  const isOpen = () => button.getAttribute("aria-expanded") === "true";
  const show = (open) => {
    button.setAttribute("aria-expanded", String(open));
    toc.classList.toggle("open", open);
  };
  button.addEventListener("click", () => show(!isOpen()));
  toc.addEventListener("click", (event) => event.target.closest("a") && show(false));
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && isOpen()) {
      show(false);
      button.focus();
    }
  });
}

// The sticky header's height, which wraps on a phone, as --header-height:
// course.css opens the contents menu below it and lands a heading reached
// by a link clear of it.
function trackHeaderHeight() {
  const header = document.querySelector(".site-header");
  new ResizeObserver(() => {
    root.style.setProperty("--header-height", `${header.offsetHeight}px`);
  }).observe(header);
}

function markCurrentSection() {
  const links = new Map();
  for (const link of document.querySelectorAll(".toc .sections a")) {
    links.set(decodeURIComponent(link.hash.slice(1)), link);
  }
  const headings = [...document.querySelectorAll("main h2[id], main section.level2[id]")]
    .filter((element) => links.has(element.id));
  if (!headings.length) return;
  let marked = null;
  function update() {
    let current = headings[0];
    for (const heading of headings) {
      if (heading.getBoundingClientRect().top < window.innerHeight * 0.25) current = heading;
    }
    const link = links.get(current.id);
    if (link === marked) return;
    if (marked) marked.removeAttribute("aria-current");
    link.setAttribute("aria-current", "location");
    marked = link;
  }
  document.addEventListener("scroll", update, { passive: true });
  update();
}

// A page opened as a file cannot run its simulations: browsers load module
// scripts and start workers only for a page a server sent. Each simulation
// says so, with the command that serves the folder this page is in.
function sayHowToServe() {
  if (location.protocol !== "file:") return;
  const folder = decodeURIComponent(location.pathname)
    .replace(/\/[^/]*$/, "")            // the page's folder
    .replace(/^\/([A-Za-z]:)/, "$1") || "/";   // on Windows, C:/... not /C:/...
  for (const sim of document.querySelectorAll(".sim")) {
    const note = document.createElement("p");
    note.className = "sim-served";
    const code = (text) => Object.assign(document.createElement("code"), { textContent: text });
    note.append("This page was opened as a file, so its simulation cannot run: a browser " +
      "starts Python only for a page a server sent. Serve its folder with ",
      code(`python3 -m http.server --directory "${folder}" 8000`),
      " (or ", code("make serve"), " in the course's folder) and open ",
      code("http://localhost:8000/"), ".");
    sim.prepend(note);
  }
}

// Search: Pagefind's index of every chapter, built with the site
// (tools/build.py), fetched when the reader first types. Each result links
// to its chapter, with the words found.
const SHOWN_RESULTS = 8;
function setUpSearch() {
  const box = document.getElementById("search-box");
  const status = document.querySelector(".search-status");
  const list = document.querySelector(".search-results");
  let engine = null;
  let asked = 0;                // the newest query: an older answer is dropped
  async function find() {
    const query = box.value.trim();
    const mine = ++asked;
    if (!query) {
      list.hidden = true;
      status.textContent = "";
      return;
    }
    try {
      engine ??= import(new URL("pagefind/pagefind.js", document.baseURI).href)
        .then(async (pagefind) => {
          await pagefind.options({ baseUrl: new URL(".", document.baseURI).pathname });
          return pagefind;
        });
      const found = await (await engine).search(query);
      const pages = await Promise.all(found.results.slice(0, SHOWN_RESULTS)
        .map((result) => result.data()));
      if (mine !== asked) return;
      list.replaceChildren(...pages.map(resultItem));
      list.hidden = pages.length === 0;
      status.textContent = found.results.length
        ? `${found.results.length} ${found.results.length === 1 ? "chapter" : "chapters"} found`
        : "Nothing found";
    } catch (error) {
      engine = null;            // try again on the next key
      status.textContent = location.protocol === "file:"
        ? "Search works only on the site served, not on a page opened as a file."
        : `Search did not load: ${error.message}`;
    }
  }
  box.addEventListener("input", find);
  // Words typed before this script ran (a slow line, a quick reader) are
  // searched now: no input event will come for them.
  if (box.value.trim()) find();
}

function resultItem(page) {
  const item = document.createElement("li");
  item.append(Object.assign(document.createElement("a"),
    { href: page.url, textContent: page.meta.title }), words(page.excerpt));
  return item;
}

// An excerpt as text, with the words found marked: Pagefind gives it as
// HTML, of which only <mark> is kept.
function words(excerpt) {
  const parsed = document.createElement("template");
  parsed.innerHTML = excerpt;
  const paragraph = document.createElement("p");
  for (const part of parsed.content.childNodes) {
    paragraph.append(part.nodeName === "MARK"
      ? Object.assign(document.createElement("mark"), { textContent: part.textContent })
      : part.textContent);
  }
  return paragraph;
}

// Reading offline: once a page has loaded, the service worker (sw.js, from
// tools/sw.js) keeps the site's pages, and Python once it has been
// started. Not for a page opened as a file, which cannot have one, nor when
// the browser asks to save data.
function keepForOffline() {
  if (!("serviceWorker" in navigator) || location.protocol === "file:"
      || navigator.connection?.saveData) return;
  window.addEventListener("load", () => {
    navigator.serviceWorker.register("sw.js").catch(() => {});   // the site works without
  });
}

// Folded answers would be missing from paper: open them all for printing.
function unfoldAnswersForPrint() {
  let opened = [];
  window.addEventListener("beforeprint", () => {
    opened = [...document.querySelectorAll("details:not([open])")];
    opened.forEach((details) => (details.open = true));
  });
  window.addEventListener("afterprint", () => {
    opened.forEach((details) => (details.open = false));
  });
}

setUpThemeToggle();
setUpContentsMenu();
trackHeaderHeight();
sayHowToServe();
setUpSearch();
markCurrentSection();
unfoldAnswersForPrint();
keepForOffline();
