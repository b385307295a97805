-- The course's own blocks, for every output format.
-- Used as a filter (EPUB, PDF) and by site.lua (the HTML site).
-- HTML gets real markup; other formats get plain equivalents.

-- site.lua, a custom writer, has no FORMAT: it sets COURSE_HTML instead.
local html = COURSE_HTML or FORMAT:match("html") or FORMAT:match("epub")

local function escape(text)
  return (text:gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"))
end

local function raw(text)
  return pandoc.RawBlock("html", text)
end

-- A transcript: prompts are drawn but not selectable, commands stand out.
local function console(block)
  -- Transcripts of one session that span terminals say which one they show.
  local terminal = block.attributes.terminal
  if not html then
    local plain = pandoc.CodeBlock(block.text)  -- plain, no highlighter cost
    if terminal then
      return { pandoc.Para({ pandoc.Emph("Terminal " .. terminal .. ":") }), plain }
    end
    return plain
  end
  local rows = {}
  for line in (block.text .. "\n"):gmatch("(.-)\n") do
    local command = line:match("^%$ (.*)$")
    if command then
      table.insert(rows, '<span class="prompt" aria-hidden="true">$ </span>'
        .. '<span class="command">' .. escape(command) .. "</span>")
    else
      table.insert(rows, escape(line))
    end
  end
  -- tabindex: a long line scrolls sideways, and keyboards must reach it too
  local label = terminal and ('<div class="terminal-label">terminal ' .. escape(terminal)
    .. "</div>") or ""
  return raw(label .. '<pre class="console" tabindex="0"><code>' .. table.concat(rows, "\n")
    .. "</code></pre>")
end

-- A diagram: monospace text the highlighter must not touch.
local function diagram(block)
  if not html then
    return pandoc.CodeBlock(block.text)
  end
  return raw('<pre class="diagram" tabindex="0"><code>' .. escape(block.text) .. "</code></pre>")
end

-- What a `python` box's example prints: labelled, so that nobody takes it
-- for a transcript to type.
local function output(block)
  if not html then
    return { pandoc.Para({ pandoc.Emph("It prints:") }), pandoc.CodeBlock(block.text) }
  end
  return raw('<div class="output-label">it prints</div><pre class="output" tabindex="0"><code>'
    .. escape(block.text) .. "</code></pre>")
end

-- A listing included from code/: numbered from its first line in the file.
local function listing(block)
  local first = tonumber(block.attributes.startFrom or "1")
  local file = block.attributes.include
  for _, name in ipairs({ "include", "pyobject", "from", "to", "startFrom" }) do
    block.attributes[name] = nil
  end
  if not html then
    return block
  end
  local caption = pandoc.Plain({ pandoc.Code((file:gsub("^code/", ""))) })
  -- Attributes as a list (pandoc.Attr), here and below, not a Lua table:
  -- a table's keys come out in another order each run, and the same guide
  -- must build the same bytes.
  return pandoc.Div({ pandoc.Div(caption, { class = "listing-file" }), block },
    pandoc.Attr("", { "listing" }, {
      { "style", "counter-reset: line " .. (first - 1) },
      -- the listing scrolls sideways on a phone: let keyboards reach it
      { "tabindex", "0" },
      { "role", "region" },
      { "aria-label", "Listing of " .. file:gsub("^code/", "") },
    }))
end

function CodeBlock(block)
  if block.classes:includes("console") then
    return console(block)
  elseif block.classes:includes("text") then
    return diagram(block)
  elseif block.classes:includes("output") then
    return output(block)
  elseif block.attributes.include then
    return listing(block)
  elseif html and block.classes:includes("python") then
    -- a `python` box's example: it may scroll sideways on a phone
    return pandoc.Div(block, pandoc.Attr("", { "example" },
      { { "tabindex", "0" }, { "role", "region" }, { "aria-label", "Example" } }))
  end
end

-- Pause and Check: the answer folds away until asked for.
local function check(div)
  local out = pandoc.Blocks({})
  for _, inner in ipairs(div.content) do
    if inner.t == "Div" and inner.classes:includes("answer") then
      if html then
        out:insert(raw('<details class="answer"><summary>Show the answer</summary>'))
        out:extend(inner.content)
        out:insert(raw("</details>"))
      else
        local first = inner.content[1]
        if first and first.content then
          first.content:insert(1, pandoc.Strong("Answer. "))
        end
        out:extend(inner.content)
      end
    else
      out:insert(inner)
    end
  end
  if html then
    return pandoc.Div(out, { class = "check" })
  end
  return pandoc.BlockQuote(out)
end

-- A simulation: its paragraph is what readers without JavaScript get.
local function sim(div)
  if not html then
    return div.content
  end
  local name = div.attributes.name
  local out = pandoc.Blocks({ raw('<div class="sim-mount" data-sim="' .. name .. '"></div>') })
  out:extend(div.content)
  return pandoc.Div(out, pandoc.Attr("", { "sim" }, { { "data-sim", name } }))
end

-- "The Python you need": an aside, set apart from the lesson around it.
-- (Not class "python": pandoc gives that class to Python code blocks.)
local function python_box(div)
  if html then
    local out = pandoc.Blocks({ raw('<aside class="python-box">') })
    out:extend(div.content)
    out:insert(raw("</aside>"))
    return out
  end
  return pandoc.BlockQuote(div.content)
end

function Div(div)
  if div.classes:includes("check") then
    return check(div)
  elseif div.classes:includes("sim") then
    return sim(div)
  elseif div.classes:includes("python") then
    return python_box(div)
  end
end

-- A table: columns as wide as their words need, not as the Markdown's
-- dashes say, and words to the left, as the site's stylesheet has them.
-- On the site it sits in a box that scrolls sideways, with a shade at the
-- edge that hides more, when a phone is too narrow for it.
function Table(tbl)
  for i, spec in ipairs(tbl.colspecs) do
    tbl.colspecs[i] = { html and spec[1] or pandoc.AlignLeft, pandoc.ColWidthDefault }
  end
  if html then
    return pandoc.Div(tbl, pandoc.Attr("", { "table-box" }, { { "tabindex", "0" } }))
  end
  return tbl
end

-- The PDF's text is justified; a table's narrow cells are not, or their
-- few words stand far apart.
function Pandoc(doc)
  if FORMAT == "typst" then
    doc.blocks:insert(1, pandoc.RawBlock("typst", "#show table: set par(justify: false)"))
  end
  return doc
end

function Header(header)
  local text = pandoc.utils.stringify(header.content)
  if header.level == 2 and text:match("^Exercise %d+") then
    header.classes:insert("exercise")
  end
  return header
end

return {
  { CodeBlock = CodeBlock, Div = Div, Header = Header, Table = Table },
  { Pandoc = Pandoc },
}
