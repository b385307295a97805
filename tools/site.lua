-- pandoc custom writer for the course site.
-- One pandoc run renders every page: the guide is split at its level-1
-- headings into chapters, links are pointed at the page that holds their
-- target, and the result is JSON for tools/build.py to put into templates.

local here = PANDOC_SCRIPT_FILE:match("(.*/)") or "./"
COURSE_HTML = true
local filters = dofile(here .. "blocks.lua")

local function ids_in(blocks)
  local found = {}
  local function note(element)
    if element.identifier and element.identifier ~= "" then
      found[element.identifier] = true
    end
  end
  pandoc.Pandoc(blocks):walk({ Header = note, Div = note, Span = note, CodeBlock = note })
  return found
end

local function split_chapters(blocks)
  local chapters = {}
  for _, block in ipairs(blocks) do
    if block.t == "Header" and block.level == 1 then
      table.insert(chapters, {
        id = block.identifier,
        file = block.identifier .. ".html",
        title = pandoc.utils.stringify(block.content),
        blocks = pandoc.Blocks({}),
        sections = {},
      })
    elseif #chapters == 0 then
      error("the guide must start with a chapter heading (# ...)")
    end
    local chapter = chapters[#chapters]
    chapter.blocks:insert(block)
    if block.t == "Header" and block.level == 2 then
      table.insert(chapter.sections, {
        id = block.identifier,
        title = pandoc.utils.stringify(block.content),
      })
    end
  end
  return chapters
end

-- A "#" after each heading, so a reader can link to any section.
local function add_anchor(header)
  if header.level > 1 and header.identifier ~= "" then
    header.content:insert(pandoc.Link({ pandoc.Str("#") }, "#" .. header.identifier, "",
      { class = "anchor", ["aria-label"] = "Link to this section" }))
  end
  return header
end

function Writer(doc, opts)
  doc = doc:walk(filters[1])
  local chapters = split_chapters(doc.blocks)
  local page_of, broken = {}, {}
  for _, chapter in ipairs(chapters) do
    for id in pairs(ids_in(chapter.blocks)) do
      page_of[id] = chapter.file
    end
  end

  local function relink(page)
    return function(link)
      local id = link.target:match("^#(.+)$")
      if not id then
        return nil
      elseif not page_of[id] then
        table.insert(broken, id)
      elseif page and page_of[id] ~= page then
        link.target = page_of[id] .. "#" .. id
        return link
      end
    end
  end

  local out = {
    title = pandoc.utils.stringify(doc.meta.title or ""),
    subtitle = pandoc.utils.stringify(doc.meta.subtitle or ""),
    chapters = {},
  }
  for _, chapter in ipairs(chapters) do
    local blocks = pandoc.Pandoc(chapter.blocks)
      :walk({ Link = relink(chapter.file), Header = add_anchor }).blocks
    table.insert(out.chapters, {
      id = chapter.id,
      file = chapter.file,
      title = chapter.title,
      sections = chapter.sections,
      html = pandoc.write(pandoc.Pandoc(blocks, doc.meta), "html5", opts),
    })
  end
  local whole = doc:walk({ Link = relink(nil), Header = add_anchor })
  out.all_in_one = pandoc.write(whole, "html5", opts)
  out.broken_links = broken
  return pandoc.json.encode(out)
end
