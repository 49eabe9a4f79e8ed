// A small, safe markdown-to-DOM renderer for pibot's web chat. It builds
// elements with createElement and text nodes only (never innerHTML), and
// links only http, https and mailto URLs. Supported: paragraphs, headings,
// fenced code blocks, block quotes, lists (nested by indentation),
// horizontal rules, tables (GitHub style), inline code, bold, italic, strikethrough, links and
// bare URLs. An unfinished construct (a streaming reply) renders as text.
(function () {
  "use strict";

  const fenceRe = /^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)[^`]*$/;
  const headingRe = /^ {0,3}(#{1,6})\s+(.*?)(\s+#+)?\s*$/;
  const hrRe = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
  const bulletRe = /^( {0,3})([-*+])(\s+)(.*)$/;
  const orderedRe = /^( {0,3})(\d{1,9})([.)])(\s+)(.*)$/;
  const quoteRe = /^ {0,3}>\s?(.*)$/;
  const blankRe = /^\s*$/;
  const delimRowRe = /^ {0,3}\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;
  const urlRe = /^https?:\/\/[^\s<>]*[^\s<>.,;:!?'")\]]/;

  function el(tag, cls) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    return e;
  }

  function indentOf(line) {
    let n = 0;
    for (const c of line) {
      if (c === " ") n++;
      else if (c === "\t") n += 4;
      else break;
    }
    return n;
  }

  function stripIndent(line, n) {
    let i = 0;
    let w = 0;
    while (i < line.length && w < n && (line[i] === " " || line[i] === "\t")) {
      w += line[i] === "\t" ? 4 : 1;
      i++;
    }
    return line.slice(i);
  }

  function isClosingFence(line, ch, len) {
    const t = line.trim();
    return t.length >= len && indentOf(line) < 4 && [...t].every((c) => c === ch);
  }

  function listMarker(line) {
    let m = bulletRe.exec(line);
    if (m) return { ordered: false, bullet: m[2], indent: m[1].length, width: m[1].length + 1 + Math.min(m[3].length, 4), text: m[4] };
    m = orderedRe.exec(line);
    if (m) return { ordered: true, start: parseInt(m[2], 10), indent: m[1].length, width: m[1].length + m[2].length + 1 + Math.min(m[4].length, 4), text: m[5] };
    return null;
  }

  // cells splits a table row at the pipes that are not escaped or inside
  // a code span.
  function cells(line) {
    let t = line.trim();
    if (t.startsWith("|")) t = t.slice(1);
    if (t.endsWith("|") && !t.endsWith("\\|")) t = t.slice(0, -1);
    const out = [];
    let cur = "";
    let code = false;
    for (let i = 0; i < t.length; i++) {
      const c = t[i];
      if (c === "\\" && t[i + 1] === "|") {
        cur += "|";
        i++;
      } else if (c === "`") {
        code = !code;
        cur += c;
      } else if (c === "|" && !code) {
        out.push(cur.trim());
        cur = "";
      } else {
        cur += c;
      }
    }
    out.push(cur.trim());
    return out;
  }

  // isTable reports whether lines[i] starts a table: a row with a pipe
  // followed by a delimiter row with as many columns.
  function isTable(lines, i) {
    if (i + 1 >= lines.length || !lines[i].includes("|") || !lines[i + 1].includes("|") || !delimRowRe.test(lines[i + 1])) return false;
    return cells(lines[i]).length === cells(lines[i + 1]).length;
  }

  function renderTable(lines, i, parent) {
    const head = cells(lines[i]);
    const align = cells(lines[i + 1]).map((d) => (d.startsWith(":") && d.endsWith(":") ? "center" : d.endsWith(":") ? "right" : d.startsWith(":") ? "left" : ""));
    const wrap = el("div", "tablewrap");
    const table = el("table");
    const row = (texts, tag, into) => {
      const tr = el("tr");
      for (let c = 0; c < head.length; c++) {
        const td = el(tag);
        if (align[c]) td.className = "align-" + align[c];
        renderInline(texts[c] || "", td);
        tr.appendChild(td);
      }
      into.appendChild(tr);
    };
    const thead = el("thead");
    row(head, "th", thead);
    table.appendChild(thead);
    const tbody = el("tbody");
    i += 2;
    while (i < lines.length && !blankRe.test(lines[i]) && lines[i].includes("|")) row(cells(lines[i++]), "td", tbody);
    table.appendChild(tbody);
    wrap.appendChild(table);
    parent.appendChild(wrap);
    return i;
  }

  function startsBlock(line) {
    return fenceRe.test(line) || headingRe.test(line) || hrRe.test(line) || quoteRe.test(line) || listMarker(line) !== null;
  }

  function renderBlocks(lines, parent) {
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if (blankRe.test(line)) {
        i++;
      } else if ((m = fenceRe.exec(line))) {
        const ch = m[1][0];
        const len = m[1].length;
        const body = [];
        i++;
        while (i < lines.length && !isClosingFence(lines[i], ch, len)) body.push(lines[i++]);
        i++;
        const pre = el("pre");
        const code = el("code");
        if (m[2]) code.dataset.lang = m[2];
        code.textContent = body.join("\n");
        pre.appendChild(code);
        parent.appendChild(pre);
      } else if ((m = headingRe.exec(line))) {
        const h = el("h" + m[1].length);
        renderInline(m[2], h);
        parent.appendChild(h);
        i++;
      } else if (hrRe.test(line)) {
        parent.appendChild(el("hr"));
        i++;
      } else if (quoteRe.test(line)) {
        const body = [];
        while (i < lines.length && (m = quoteRe.exec(lines[i]))) {
          body.push(m[1]);
          i++;
        }
        const q = el("blockquote");
        renderBlocks(body, q);
        parent.appendChild(q);
      } else if (isTable(lines, i)) {
        i = renderTable(lines, i, parent);
      } else if (listMarker(line)) {
        i = renderList(lines, i, parent);
      } else {
        const body = [line];
        i++;
        while (i < lines.length && !blankRe.test(lines[i]) && !startsBlock(lines[i]) && !isTable(lines, i)) body.push(lines[i++]);
        const p = el("p");
        renderInline(body.map((l) => l.trim()).join("\n"), p);
        parent.appendChild(p);
      }
    }
  }

  function renderList(lines, i, parent) {
    const first = listMarker(lines[i]);
    const list = el(first.ordered ? "ol" : "ul");
    if (first.ordered && first.start !== 1) list.start = first.start;
    parent.appendChild(list);
    while (i < lines.length) {
      const mk = listMarker(lines[i]);
      if (!mk || mk.ordered !== first.ordered || mk.indent > first.indent + 1) break;
      const item = [mk.text];
      i++;
      while (i < lines.length) {
        const line = lines[i];
        if (blankRe.test(line)) {
          let j = i + 1;
          while (j < lines.length && blankRe.test(lines[j])) j++;
          if (j < lines.length && indentOf(lines[j]) >= mk.width) {
            for (; i < j; i++) item.push("");
            continue;
          }
          break;
        }
        if (indentOf(line) >= mk.width || (indentOf(line) >= 2 && listMarker(stripIndent(line, 2)))) {
          item.push(stripIndent(line, mk.width));
          i++;
          continue;
        }
        if (startsBlock(line)) break;
        item.push(line.trim()); // lazy continuation
        i++;
      }
      const li = el("li");
      renderBlocks(item, li);
      list.appendChild(li);
      let j = i;
      while (j < lines.length && blankRe.test(lines[j])) j++;
      if (j < lines.length && listMarker(lines[j]) && listMarker(lines[j]).ordered === first.ordered) i = j;
      else break;
    }
    return i;
  }

  function safeURL(raw) {
    try {
      const u = new URL(raw);
      if (u.protocol === "http:" || u.protocol === "https:" || u.protocol === "mailto:") return u.href;
    } catch (e) {
      return null;
    }
    return null;
  }

  function link(href, parent) {
    const a = el("a");
    a.href = href;
    a.target = "_blank";
    a.rel = "noopener noreferrer nofollow";
    parent.appendChild(a);
    return a;
  }

  function isWordChar(c) {
    return c !== undefined && /[\p{L}\p{N}]/u.test(c);
  }

  // findClose finds the closing delimiter for an emphasis that opened at
  // "from" (just after the opening delimiter).
  function findClose(text, delim, from) {
    for (let j = from; j <= text.length - delim.length; j++) {
      if (text[j] === "\\") {
        j++;
        continue;
      }
      if (text[j] === "`") {
        const end = text.indexOf("`", j + 1);
        if (end > 0) j = end;
        continue;
      }
      if (!text.startsWith(delim, j) || /\s/.test(text[j - 1])) continue;
      if (delim.length === 1 && (text[j + 1] === delim || text[j - 1] === delim)) continue;
      if (delim === "_" && isWordChar(text[j + 1])) continue;
      return j;
    }
    return -1;
  }

  // matching returns the index of the bracket closing the one at i.
  function matching(text, i, open, close) {
    let depth = 0;
    for (let j = i; j < text.length; j++) {
      if (text[j] === "\\") j++;
      else if (text[j] === open) depth++;
      else if (text[j] === close && --depth === 0) return j;
    }
    return -1;
  }

  function renderInline(text, parent) {
    let buf = "";
    const flush = () => {
      if (buf) parent.appendChild(document.createTextNode(buf));
      buf = "";
    };
    let i = 0;
    while (i < text.length) {
      const c = text[i];
      if (c === "\\" && i + 1 < text.length && /[!-/:-@[-`{-~]/.test(text[i + 1])) {
        buf += text[i + 1];
        i += 2;
        continue;
      }
      if (c === "`") {
        let n = 1;
        while (text[i + n] === "`") n++;
        const ticks = "`".repeat(n);
        const end = text.indexOf(ticks, i + n);
        if (end >= 0) {
          flush();
          let inner = text.slice(i + n, end).replace(/\n/g, " ");
          if (inner.length > 2 && inner[0] === " " && inner[inner.length - 1] === " ") inner = inner.slice(1, -1);
          const code = el("code");
          code.textContent = inner;
          parent.appendChild(code);
          i = end + n;
        } else {
          buf += ticks;
          i += n;
        }
        continue;
      }
      if (c === "*" || c === "_" || c === "~") {
        const double = text[i + 1] === c;
        const delim = double ? c + c : c;
        const open = i + delim.length;
        const canOpen = open < text.length && !/\s/.test(text[open]) && !(c === "_" && isWordChar(text[i - 1]));
        if (canOpen && (c !== "~" || double)) {
          const end = findClose(text, delim, open + 1);
          if (end > 0) {
            flush();
            const e = el(c === "~" ? "del" : double ? "strong" : "em");
            renderInline(text.slice(open, end), e);
            parent.appendChild(e);
            i = end + delim.length;
            continue;
          }
        }
        buf += delim;
        i += delim.length;
        continue;
      }
      if (c === "[") {
        const close = matching(text, i, "[", "]");
        if (close > 0 && text[close + 1] === "(") {
          const end = matching(text, close + 1, "(", ")");
          if (end > 0) {
            const target = text.slice(close + 2, end).trim().split(/\s+/)[0].replace(/^<(.*)>$/, "$1");
            const href = safeURL(target);
            flush();
            if (href) renderInline(text.slice(i + 1, close), link(href, parent));
            else renderInline(text.slice(i + 1, close), parent);
            i = end + 1;
            continue;
          }
        }
      }
      if (c === "h" && !isWordChar(text[i - 1])) {
        const m = urlRe.exec(text.slice(i));
        const href = m && safeURL(m[0]);
        if (href) {
          flush();
          link(href, parent).textContent = m[0];
          i += m[0].length;
          continue;
        }
      }
      buf += c;
      i++;
    }
    flush();
  }

  // render returns a DocumentFragment for markdown text md.
  function render(md) {
    const frag = document.createDocumentFragment();
    renderBlocks(String(md).replace(/\r\n?/g, "\n").split("\n"), frag);
    return frag;
  }

  window.pibotMarkdown = { render: render };
})();
