// Runs before the page is drawn, so a reader who chose a theme never sees
// the other one flash. Without a choice, the CSS follows the system setting.
try {
  const chosen = localStorage.getItem("theme");
  if (chosen === "light" || chosen === "dark") {
    document.documentElement.dataset.theme = chosen;
  }
} catch (e) {
  // Storage can be blocked; the system setting still applies.
}
