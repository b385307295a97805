// The site's service worker, for reading offline: tools/build.py writes it
// to site/sw.js with SITE filled in, and site.js registers it once a page has
// loaded. It runs on Workbox (npm: workbox-sw, workbox-precaching), whose
// files the build copies to site/workbox/.
//
// - Every page, style, script, font, given file and the search index is
//   kept from the first visit (Workbox's precache: SITE.pages, each with its
//   revision, a hash of its bytes).
// - Python (SITE.python.files) is not fetched for that: it is kept the
//   first time the reader starts a simulation, which is when they agreed to
//   download it. Every later Start, on any chapter, takes it from here.
// - A new build writes a new sw.js. The browser installs it at the reader's
//   next visit: Workbox fetches the pages whose revision changed and drops
//   the ones gone, and Python kept under another version is deleted.

importScripts("workbox/workbox-sw.js");
workbox.setConfig({ modulePathPrefix: "workbox/", debug: false });

// Written by the build: { pages: [{url, revision}], python: {files, version} }.
const SITE = null;

// Pagefind asks for its index with a timestamp after "?": no address here
// means anything else with one.
workbox.precaching.precacheAndRoute(SITE.pages, { ignoreURLParametersMatching: [/./] });

const PYTHON = `python-${SITE.python.version}`;
const pythonFiles = new Set(SITE.python.files.map((path) => new URL(path, self.registration.scope).href));
workbox.routing.registerRoute(({ url }) => pythonFiles.has(url.href),
  new workbox.strategies.CacheFirst({ cacheName: PYTHON }));

// A new build's worker takes over at once, open pages included: the site is
// read, never written, so nothing is lost if a page's next fetch is newer.
self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => {
  event.waitUntil(caches.keys().then((names) => Promise.all(names
    .filter((name) => name.startsWith("python-") && name !== PYTHON)
    .map((name) => caches.delete(name)))));
});
workbox.core.clientsClaim();
