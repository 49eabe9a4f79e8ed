// pibot web chat client. The conversation is first rebuilt from its
// session (/api/history: the main line and each thread as the model sees
// them), then kept live by Server-Sent Events from /api/events, upserted
// by place and message id (an edit carries the whole message); messages
// and button presses are posted to /api/send and /api/action. Untrusted
// text only ever reaches the page through text nodes (see markdown.js).
(function () {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const ui = {
    messages: $("messages"), input: $("input"), composer: $("composer"), threads: $("threads"),
    convs: $("convs"), status: $("status"), statustext: $("statustext"), stop: $("stop"),
    toast: $("toast"), conn: $("conn"), location: $("location"), threadhead: $("threadhead"),
    threadroot: $("threadroot"), back: $("back"), tree: $("tree"), newconv: $("newconv"),
    menu: $("menu"), scrim: $("scrim"),
  };
  const idRe = /^[A-Za-z0-9_-]{1,64}$/;

  function randomId(bytes) {
    const b = new Uint8Array(bytes);
    crypto.getRandomValues(b);
    return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  }

  function excerpt(text) {
    const t = String(text).replace(/[*_`~#>|]+/g, "").replace(/\s+/g, " ").trim();
    return t.length > 60 ? t.slice(0, 57) + "…" : t || "(empty)";
  }

  let conv = localStorage.getItem("pibot.conv");
  if (!conv || !idRe.test(conv)) {
    conv = randomId(12);
    localStorage.setItem("pibot.conv", conv);
  }

  // keyOf names a message on the page: the place (thread) it is shown in
  // and its id. After a /tree jump onto a thread's branch the main line
  // shows that thread's messages too, under the same ids.
  function keyOf(d) {
    return d.thread + "/" + d.id;
  }

  // originOf is the place a message was posted in, which a reply names:
  // a rebuilt message shown elsewhere says so (origin).
  function originOf(d) {
    return typeof d.origin === "string" ? d.origin : d.thread;
  }

  const state = {
    view: "", // thread id shown; "" is the main line
    msgs: new Map(), // keyOf -> {data, el, pressed, shown}
    threads: new Map(), // thread id -> {root: {id, thread} | null, title, titled, count, started}
    status: new Map(), // thread id -> {text, since (ms)}
    last: "", // last SSE event id
    connected: false, // the event stream is open
    problem: "", // what pibot says is wrong ("storage unavailable, retrying"), from its health events
    ready: false,
    es: null,
    presses: 0, // counts button presses
    pressed: 0, // the press whose answer may move the branch (a /tree jump), 0 if none
    seen: new Set(), // keys of messages the session had when last asked
    gone: new Set(), // ids the session has off the branch of their place
    loading: null,
    again: undefined, // a refresh asked for while one runs (its prune flag)
  };

  async function request(path, init) {
    const res = await fetch(path, Object.assign({ credentials: "same-origin" }, init));
    if (!res.ok) {
      const text = (await res.text()).trim();
      throw new Error(text || res.status + " " + res.statusText);
    }
    return res.json();
  }

  function post(path, body) {
    return request(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  }

  function showToast(text) {
    ui.toast.textContent = text;
    ui.toast.hidden = false;
    clearTimeout(showToast.timer);
    showToast.timer = setTimeout(() => (ui.toast.hidden = true), 4000);
  }

  function nearBottom() {
    const m = ui.messages;
    return m.scrollHeight - m.scrollTop - m.clientHeight < 80;
  }

  function scrollDown() {
    ui.messages.scrollTop = ui.messages.scrollHeight;
  }

  function openPanel(open) {
    document.body.classList.toggle("panel-open", open);
    ui.scrim.hidden = !open;
    ui.menu.setAttribute("aria-expanded", String(open));
    if (open) loadConvs();
  }

  // ---- threads ----

  function noteThread(d) {
    if (!d.thread) return;
    let th = state.threads.get(d.thread);
    if (!th) {
      th = { root: d.replyTo || null, title: "New thread", titled: false, count: 0, started: false };
      state.threads.set(d.thread, th);
    }
    // A thread is named after what the user asked in it, not after the
    // message (often a tool line) it hangs off.
    if (!th.titled && d.from === "user") {
      th.title = excerpt(d.text);
      th.titled = true;
    }
    th.count++;
    if (d.from === "bot") th.started = true;
    renderThreads();
  }

  function renderThreads() {
    ui.threads.replaceChildren();
    const add = (id, title, count) => {
      const li = document.createElement("li");
      li.dataset.thread = id;
      li.textContent = title;
      if (count !== undefined) {
        const c = document.createElement("span");
        c.className = "count";
        c.textContent = "(" + count + ")";
        li.appendChild(c);
      }
      li.title = title;
      if (id === state.view) li.classList.add("active");
      li.addEventListener("click", () => {
        switchView(id);
        openPanel(false);
      });
      ui.threads.appendChild(li);
    };
    add("", "Main line");
    for (const [id, th] of state.threads) add(id, th.title, th.count);
    renderMarks();
  }

  // findRoot returns the message a thread hangs off ({id, thread}: the
  // place it was posted in), or undefined.
  function findRoot(root) {
    if (!root) return undefined;
    const m = state.msgs.get(root.thread + "/" + root.id);
    if (m) return m;
    for (const x of state.msgs.values()) if (x.data.id === root.id && originOf(x.data) === root.thread) return x;
    return undefined;
  }

  // renderMarks puts a marker on each message that threads hang off.
  function renderMarks() {
    for (const m of state.msgs.values()) {
      m.el.querySelector(".marks").replaceChildren();
      m.el.classList.remove("hasthread");
    }
    for (const [id, th] of state.threads) {
      const root = findRoot(th.root);
      if (!root || th.count === 0) continue;
      const b = document.createElement("button");
      b.type = "button";
      b.className = "threadmark";
      b.textContent = "💬 " + th.title + " · " + th.count;
      b.title = "Open this thread";
      b.addEventListener("click", () => switchView(id));
      root.el.querySelector(".marks").appendChild(b);
      root.el.classList.add("hasthread");
    }
  }

  function switchView(thread) {
    state.view = thread;
    for (const m of state.msgs.values()) m.el.hidden = m.data.thread !== thread;
    const th = state.threads.get(thread);
    ui.threadhead.hidden = !thread;
    ui.location.textContent = thread ? "thread: " + (th ? th.title : thread) : "main line";
    ui.threadroot.replaceChildren();
    const root = th && findRoot(th.root);
    if (root) ui.threadroot.appendChild(window.pibotMarkdown.render(root.data.text));
    renderThreads();
    renderStatus();
    scrollDown();
  }

  function startThread(d) {
    const root = { id: d.id, thread: originOf(d) };
    for (const [id, th] of state.threads) {
      if (th.root && th.root.id === root.id && th.root.thread === root.thread) return switchView(id);
    }
    const id = "t" + randomId(8);
    state.threads.set(id, { root: root, title: "New thread", titled: false, count: 0, started: false });
    switchView(id);
    ui.input.focus();
  }

  // ---- messages ----

  function makeMsg(d) {
    const el = document.createElement("div");
    el.className = "msg " + d.from + (d.note ? " note" : "");
    el.dataset.id = d.id;
    el.dataset.thread = d.thread;
    const who = document.createElement("div");
    who.className = "who";
    const name = document.createElement("span");
    name.textContent = d.from === "user" ? "you" : "pibot";
    who.append(name);
    // A message the session knows no platform id for ("h-") cannot be
    // replied to.
    if (!d.id.startsWith("h-")) {
      const reply = document.createElement("button");
      reply.type = "button";
      reply.className = "threadbtn";
      reply.title = "Reply in thread";
      const long = Object.assign(document.createElement("span"), { className: "long", textContent: "Reply in thread" });
      const short = Object.assign(document.createElement("span"), { className: "short", textContent: "↳ thread" });
      reply.append(long, short);
      who.append(reply);
      reply.addEventListener("click", () => startThread(m.data));
    }
    const body = document.createElement("div");
    body.className = "body";
    const buttons = document.createElement("div");
    buttons.className = "buttons";
    const error = document.createElement("div");
    error.className = "error";
    const marks = document.createElement("div");
    marks.className = "marks";
    el.append(who, body, buttons, error, marks);
    const m = { data: d, el: el, pressed: false, shown: null };
    return m;
  }

  function fillMsg(m) {
    const d = m.data;
    if (m.shown === null || m.shown.text !== d.text) {
      m.el.querySelector(".body").replaceChildren(window.pibotMarkdown.render(d.text));
    }
    const buttonsJSON = JSON.stringify(d.buttons || []);
    if (m.shown === null || m.shown.buttons !== buttonsJSON) {
      m.pressed = false;
      const box = m.el.querySelector(".buttons");
      box.replaceChildren();
      for (const row of d.buttons || []) {
        for (const b of row) {
          const btn = document.createElement("button");
          btn.type = "button";
          btn.textContent = b.label;
          if (b.style) btn.classList.add(b.style);
          btn.addEventListener("click", () => press(m, b, btn));
          box.appendChild(btn);
        }
        box.appendChild(Object.assign(document.createElement("div"), { className: "rowbreak" }));
      }
    }
    const err = m.el.querySelector(".error");
    err.replaceChildren();
    if (d.error) {
      err.append("Not delivered: " + d.error + " ");
      const retry = document.createElement("button");
      retry.type = "button";
      retry.textContent = "Retry";
      retry.addEventListener("click", () => deliver(m.data));
      err.appendChild(retry);
    }
    m.shown = { text: d.text, buttons: buttonsJSON };
  }

  // dropRebuilt removes a rebuilt reply the session had no id for once
  // the live copy of it arrives.
  function dropRebuilt(d) {
    if (d.from !== "bot") return;
    for (const [key, m] of state.msgs) {
      if (m.data.id.startsWith("h-") && m.data.thread === d.thread && m.data.text === d.text) {
        m.el.remove();
        state.msgs.delete(key);
      }
    }
  }

  // shownLive returns the live copy of a reply the session has no id for
  // yet, if the page shows it already.
  function shownLive(d) {
    const text = d.text.trim();
    for (const m of state.msgs.values()) {
      if (m.data.from === "bot" && m.data.thread === d.thread && !m.data.id.startsWith("h-") && m.data.text.includes(text)) return m;
    }
    return undefined;
  }

  // upsert adds or updates a message. A new one goes after the message
  // after (null: first of the page); without it, at the end.
  function upsert(d, after) {
    const follow = nearBottom();
    const key = keyOf(d);
    let m = state.msgs.get(key);
    if (!m) {
      if (!d.id.startsWith("h-")) dropRebuilt(d);
      m = makeMsg(d);
      state.msgs.set(key, m);
      if (after === undefined) ui.messages.appendChild(m.el);
      else if (after === null) ui.messages.prepend(m.el);
      else after.el.after(m.el);
      noteThread(d);
    } else {
      m.data = d;
    }
    m.el.hidden = d.thread !== state.view;
    fillMsg(m);
    if (follow) scrollDown();
    return m;
  }

  function clearView() {
    state.msgs.clear();
    state.threads.clear();
    state.seen.clear();
    state.gone.clear();
    ui.messages.replaceChildren();
  }

  function removeMsg(key) {
    const m = state.msgs.get(key);
    if (!m) return;
    m.el.remove();
    state.msgs.delete(key);
    const th = state.threads.get(m.data.thread);
    if (th && th.count > 0) th.count--;
  }

  // refresh merges the conversation as its session has it (/api/history)
  // into the view: messages the page lacks are added in the session's
  // order (after the message before them in their place), messages the
  // session has off the branch of the place they were posted in (a /tree
  // jump moved the head: "elsewhere") are removed there, and with prune so
  // are messages an earlier answer listed that this one no longer has.
  // What only the live log has (command replies, a reply still streaming)
  // is left alone.
  function refresh(prune) {
    if (state.loading) {
      state.again = state.again || prune;
      return state.loading;
    }
    const forConv = conv;
    state.loading = (async () => {
      let h;
      try {
        h = await request("/api/history?conv=" + encodeURIComponent(forConv));
      } catch (e) {
        showToast("History not loaded: " + e.message);
        return;
      }
      if (forConv !== conv) return;
      const now = new Set(h.messages.map(keyOf));
      let changed = prune;
      const drop = (key) => {
        changed = changed || state.msgs.has(key);
        removeMsg(key);
        state.seen.delete(key);
      };
      state.gone = new Set(h.elsewhere || []);
      for (const [key, m] of state.msgs) {
        if (state.gone.has(m.data.id) && originOf(m.data) === m.data.thread) drop(key);
      }
      if (prune) {
        for (const key of state.seen) if (!now.has(key)) drop(key);
      }
      for (const th of h.threads) {
        if (!idRe.test(th.id)) continue;
        const cur = state.threads.get(th.id);
        if (!cur) state.threads.set(th.id, { root: th.root || null, title: th.title || "Thread", titled: !!th.title, count: 0, started: true });
        else if (th.title) Object.assign(cur, { title: th.title, titled: true, started: true, root: cur.root || th.root || null });
      }
      let prev = null;
      let place;
      for (const d of h.messages) {
        if (d.thread !== place) {
          place = d.thread;
          prev = null;
        }
        let m = state.msgs.get(keyOf(d)) || (d.id.startsWith("h-") ? shownLive(d) : undefined);
        if (!m) {
          state.seen.add(keyOf(d));
          m = upsert(d, prev);
          changed = true;
        }
        prev = m;
      }
      for (const key of now) if (state.msgs.has(key)) state.seen.add(key);
      // A quiet refresh that changed nothing leaves the view (and where
      // it is scrolled) alone.
      if (changed) switchView(state.threads.has(state.view) ? state.view : "");
      else renderThreads();
    })().finally(() => {
      state.loading = null;
      if (state.again !== undefined) {
        const p = state.again;
        state.again = undefined;
        refresh(p);
      }
    });
    return state.loading;
  }

  // ---- sending ----

  async function deliver(d) {
    const m = state.msgs.get(keyOf(d));
    m.el.classList.add("pending");
    m.data.error = "";
    fillMsg(m);
    try {
      await post("/api/send", { conv: conv, thread: d.thread, id: d.id.slice(2), text: d.text, replyTo: d.replyTo || null });
      const th = state.threads.get(d.thread);
      if (th) th.started = true;
      m.data.error = "";
    } catch (e) {
      m.data.error = e.message;
    }
    m.el.classList.remove("pending");
    fillMsg(m);
  }

  function send(text) {
    const thread = state.view;
    const th = state.threads.get(thread);
    const replyTo = th && !th.started && th.root ? th.root : null;
    const d = { type: "msg", id: "u-" + randomId(12), thread: thread, from: "user", text: text, replyTo: replyTo };
    upsert(d);
    scrollDown();
    return deliver(d);
  }

  // command sends a command of a page control (the Tree and Stop
  // buttons) for the place shown; it is not posted as a message.
  async function command(text) {
    try {
      await post("/api/send", { conv: conv, thread: state.view, id: randomId(12), text: text, replyTo: null, quiet: true });
    } catch (e) {
      showToast("Not sent: " + e.message);
    }
  }

  async function press(m, b, btn) {
    if (m.pressed) return;
    m.pressed = true;
    const all = m.el.querySelectorAll(".buttons button");
    all.forEach((x) => (x.disabled = true));
    btn.classList.add("pressed");
    // A press may move the branch (a /tree jump): once the gateway has
    // answered it (its toast), or after a second, the view is refreshed
    // to show what the model will see.
    const mine = ++state.presses;
    state.pressed = mine;
    setTimeout(() => {
      if (state.pressed === mine) {
        state.pressed = 0;
        refresh(true);
      }
    }, 1000);
    try {
      await post("/api/action", { conv: conv, msg: m.data.id, data: b.id, id: randomId(12) });
    } catch (e) {
      if (state.pressed === mine) state.pressed = 0;
      m.pressed = false;
      all.forEach((x) => (x.disabled = false));
      btn.classList.remove("pressed");
      showToast("Not sent: " + e.message);
    }
  }

  // ---- status ----

  // statusParts turns a status line into text and code pieces:
  // "running bash…" becomes running `bash` · 5 s.
  function statusParts(text, since) {
    let parts = [text];
    let m;
    if ((m = /^running (.+?)…?$/.exec(text))) parts = ["running ", { code: m[1] }];
    else if ((m = /^(\d+) queued message\(s\)$/.exec(text))) parts = [m[1] + (m[1] === "1" ? " queued message" : " queued messages")];
    const secs = since ? Math.floor((Date.now() - since) / 1000) : 0;
    if (secs >= 1) parts.push(" · " + secs + " s");
    return parts;
  }

  function renderStatus() {
    const st = state.status.get(state.view);
    ui.status.hidden = !st;
    if (!st) return;
    ui.statustext.replaceChildren();
    for (const p of statusParts(st.text, st.since)) {
      if (typeof p === "string") {
        ui.statustext.append(p);
      } else {
        const c = document.createElement("code");
        c.textContent = p.code;
        ui.statustext.append(c);
      }
    }
  }
  setInterval(renderStatus, 1000);

  // ---- events ----

  // later learns, once replies have been quiet for a while, what the
  // session recorded of them: a later branch move can then take them off
  // the view.
  function later() {
    clearTimeout(later.timer);
    later.timer = setTimeout(() => refresh(false), 1500);
  }

  // renderConn shows the stream's state in the header, and pibot's
  // problem beside it while it has one.
  function renderConn() {
    let text = state.connected ? "connected" : "reconnecting…";
    if (state.connected && state.problem) text += " · " + state.problem;
    ui.conn.textContent = text;
    ui.conn.title = text;
    ui.conn.classList.toggle("ok", state.connected && !state.problem);
    ui.conn.classList.toggle("degraded", state.connected && !!state.problem);
  }

  function handle(ev) {
    switch (ev.type) {
      case "health":
        state.problem = typeof ev.problem === "string" ? ev.problem : "";
        renderConn();
        break;
      case "reset":
        // pibot restarted: its live log is new, the session has the rest.
        state.status.clear();
        renderStatus();
        refresh(true);
        break;
      case "ready":
        state.ready = true;
        scrollDown();
        break;
      case "msg":
        // A message a branch move left is not shown again by the replay
        // of the live log.
        if (state.gone.has(ev.id) && !state.msgs.has(keyOf(ev))) break;
        upsert(ev);
        if (state.ready && ev.from === "bot") later();
        break;
      case "status":
        if (ev.text) {
          const since = ev.since ? Date.parse(ev.since) : Date.now();
          state.status.set(ev.thread, { text: ev.text, since: Math.min(since, Date.now()) });
        } else if (state.status.delete(ev.thread) && state.ready) {
          later();
        }
        renderStatus();
        break;
      case "toast":
        if (!state.ready) break;
        showToast(ev.text);
        if (state.pressed) {
          state.pressed = 0;
          refresh(true);
        }
        break;
    }
  }

  function connect() {
    if (state.es) state.es.close();
    state.ready = false;
    let url = "/api/events?conv=" + encodeURIComponent(conv);
    if (state.last) url += "&last=" + encodeURIComponent(state.last);
    const es = new EventSource(url);
    state.es = es;
    es.onopen = () => {
      // A new stream sends pibot's problem first, if it has one.
      state.problem = "";
      state.connected = true;
      renderConn();
    };
    es.onmessage = (ev) => {
      if (state.es !== es) return;
      if (ev.lastEventId) state.last = ev.lastEventId;
      let data;
      try {
        data = JSON.parse(ev.data);
      } catch (e) {
        return;
      }
      handle(data);
    };
    es.onerror = () => {
      state.connected = false;
      renderConn();
      if (es.readyState === EventSource.CLOSED) {
        setTimeout(() => {
          if (state.es === es) connect();
        }, 2000);
      }
    };
  }

  // ---- conversations ----

  async function loadConvs() {
    let list;
    try {
      list = (await request("/api/conversations")).conversations;
    } catch (e) {
      return;
    }
    ui.convs.replaceChildren();
    if (!list.some((c) => c.id === conv)) list.unshift({ id: conv, title: "This conversation", messages: 0 });
    for (const c of list) {
      if (!idRe.test(c.id)) continue;
      const li = document.createElement("li");
      li.dataset.conv = c.id;
      li.textContent = c.title || "(untitled)";
      li.title = c.title || "";
      if (c.agent) {
        // The agent the conversation's session belongs to.
        const agent = document.createElement("span");
        agent.className = "agent";
        agent.textContent = " · " + c.agent;
        li.appendChild(agent);
        li.title += " (agent " + c.agent + ")";
      }
      if (c.updated) {
        const when = document.createElement("span");
        when.className = "count";
        when.textContent = new Date(c.updated).toLocaleDateString();
        li.appendChild(when);
      }
      if (c.id === conv) li.classList.add("active");
      li.addEventListener("click", () => {
        openPanel(false);
        switchConv(c.id);
      });
      ui.convs.appendChild(li);
    }
  }

  async function switchConv(id) {
    if (id === conv) return;
    conv = id;
    localStorage.setItem("pibot.conv", conv);
    // The old conversation's stream stops before the view is cleared: a
    // reply still streaming there must not land in the new one.
    if (state.es) {
      state.es.close();
      state.es = null;
    }
    state.last = "";
    state.status.clear();
    clearView();
    state.view = "";
    switchView("");
    await refresh(true);
    connect();
    loadConvs();
  }

  // ---- wiring ----

  ui.composer.addEventListener("submit", (e) => {
    e.preventDefault();
    const text = ui.input.value.replace(/^\s*\n|\s+$/g, "");
    if (!text.trim()) return;
    ui.input.value = "";
    send(text);
  });
  ui.input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      ui.composer.requestSubmit();
    }
  });
  ui.back.addEventListener("click", () => switchView(""));
  ui.tree.addEventListener("click", () => command("/tree"));
  ui.stop.addEventListener("click", () => command("/stop"));
  ui.menu.addEventListener("click", () => openPanel(!document.body.classList.contains("panel-open")));
  ui.scrim.addEventListener("click", () => openPanel(false));
  ui.newconv.addEventListener("click", () => switchConv(randomId(12)));

  // ---- empty state ----

  // A view without messages says how to start, and what is missing first
  // when pibot says so (/api/info: no model configured). It follows the
  // message list whatever changes it.
  function renderEmpty() {
    let any = false;
    for (const el of ui.messages.children) {
      if (!el.hidden) {
        any = true;
        break;
      }
    }
    $("empty").hidden = any;
  }
  new MutationObserver(renderEmpty).observe(ui.messages, { childList: true, subtree: true, attributes: true, attributeFilter: ["hidden"] });
  request("/api/info").then((info) => {
    if (!info.notice) return;
    const n = $("notice");
    n.replaceChildren(window.pibotMarkdown.render(info.notice));
    n.hidden = false;
  }, () => {});
  renderEmpty();

  renderThreads();
  refresh(true).then(() => {
    connect();
    loadConvs();
  });
})();
