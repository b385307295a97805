"""Read the built site's HTML with the standard library's parser."""
from html.parser import HTMLParser
from pathlib import Path

HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")


class Page(HTMLParser):
    """One HTML file: its ids, its links, the text of its headings and of its
    listings."""

    def __init__(self, path):
        super().__init__(convert_charrefs=True)
        self.path = Path(path)
        self.ids, self.links, self.listings, self.chapter_links = set(), [], [], []
        self.headings = []        # the text of each h1-h6, in order
        self._stack = []          # open elements, as (tag, classes)
        self._listing = None      # text of the listing being read, as a list
        self.feed(self.path.read_text(encoding="utf-8"))

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if "id" in attrs:
            self.ids.add(attrs["id"])
        for name in ("href", "src"):
            if attrs.get(name):
                self.links.append(attrs[name])
        if tag == "a" and self._inside("nav", "toc") and "href" in attrs:
            self.chapter_links.append(attrs["href"])
        if tag in HEADINGS:
            self.headings.append("")
        if tag == "div" and "listing" in classes:
            self._listing = []
            self.listings.append(self._listing)
        if tag not in ("br", "img", "input", "link", "meta", "col", "hr", "source"):
            self._stack.append((tag, classes))

    def handle_endtag(self, tag):
        while self._stack:
            open_tag, classes = self._stack.pop()
            if open_tag == "div" and "listing" in classes:
                self._listing = None
            if open_tag == tag:
                break

    def handle_data(self, data):
        if any(tag in HEADINGS for tag, _ in self._stack):
            self.headings[-1] += data
        # a listing's code, without its file-name caption
        if self._listing is not None and self._inside("code") and \
                not self._inside("div", "listing-file"):
            self._listing.append(data)

    def _inside(self, tag, css_class=None):
        return any(t == tag and (css_class is None or css_class in c) for t, c in self._stack)

    def listing_texts(self):
        return ["".join(parts) for parts in self.listings]
