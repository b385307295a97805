"""make bench: build time, page weight, queue and simulation numbers.

Run as `.venv/bin/python -m tools.bench` (__main__.py); queues.py and sims.py
are its parts."""
from html.parser import HTMLParser


class StartLink(HTMLParser):
    """The first <a class="start"> of a page: the index's "Start reading"."""

    def __init__(self, text):
        super().__init__()
        self.href = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if self.href is None and tag == "a" and attrs.get("class") == "start":
            self.href = attrs.get("href")


def first_chapter(site):
    """The page a built site's "Start reading" link opens, or None."""
    return StartLink((site / "index.html").read_text(encoding="utf-8")).href
