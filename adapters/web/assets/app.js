// pibot web chat client. Messages arrive as Server-Sent Events from
// /api/events and are upserted by id (an edit carries the whole message);
// messages and button presses are posted to /api/send and /api/action.
// Untrusted text only ever reaches the page through text nodes (see
// markdown.js).
(function () {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const ui = {
    messages: $("messages"), input: $("input"), composer: $("composer"), threads: $("threads"),
    status: $("status"), toast: $("toast"), conn: $("conn"), location: $("location"),
    threadhead: $("threadhead"), threadroot: $("threadroot"), back: $("back"),
    tree: $("tree"), newconv: $("newconv"),
  };

  function randomId(bytes) {
    const b = new Uint8Array(bytes);
    crypto.getRandomValues(b);
    return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  }

  function excerpt(text) {
    const t = String(text).replace(/[*_`~#>]+/g, "").replace(/\s+/g, " ").trim();
    return t.length > 60 ? t.slice(0, 57) + "…" : t || "(empty)";
  }

  let conv = localStorage.getItem("pibot.conv");
  if (!conv || !/^[A-Za-z0-9_-]{1,64}$/.test(conv)) {
    conv = randomId(12);
    localStorage.setItem("pibot.conv", conv);
  }

  const state = {
    view: "", // thread id shown; "" is the main line
    msgs: new Map(), // id -> {data, el, pressed}
    threads: new Map(), // thread id -> {root: {id, thread} | null, title, count, started}
    status: new Map(), // thread id -> status text
    last: "", // last SSE event id
    ready: false,
    es: null,
  };

  async function post(path, body) {
    const res = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      credentials: "same-origin",
    });
    if (!res.ok) {
      const text = (await res.text()).trim();
      throw new Error(text || res.status + " " + res.statusText);
    }
    return res.json();
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

  // ---- threads ----

  function noteThread(d) {
    if (!d.thread) return;
    let th = state.threads.get(d.thread);
    if (!th) {
      const root = d.replyTo || null;
      const rootMsg = root && state.msgs.get(root.id);
      th = { root: root, title: excerpt(rootMsg ? rootMsg.data.text : d.text), count: 0, started: false };
      state.threads.set(d.thread, th);
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
      li.addEventListener("click", () => switchView(id));
      ui.threads.appendChild(li);
    };
    add("", "Main line");
    for (const [id, th] of state.threads) add(id, th.title, th.count);
  }

  function switchView(thread) {
    state.view = thread;
    for (const m of state.msgs.values()) m.el.hidden = m.data.thread !== thread;
    const th = state.threads.get(thread);
    ui.threadhead.hidden = !thread;
    ui.location.textContent = thread ? "thread: " + (th ? th.title : thread) : "main line";
    ui.threadroot.replaceChildren();
    const root = th && th.root && state.msgs.get(th.root.id);
    if (root) ui.threadroot.appendChild(window.pibotMarkdown.render(root.data.text));
    renderThreads();
    renderStatus();
    scrollDown();
    ui.input.focus();
  }

  function startThread(d) {
    for (const [id, th] of state.threads) {
      if (th.root && th.root.id === d.id) return switchView(id);
    }
    const id = "t" + randomId(8);
    state.threads.set(id, { root: { id: d.id, thread: d.thread }, title: excerpt(d.text), count: 0, started: false });
    switchView(id);
  }

  // ---- messages ----

  function makeMsg(d) {
    const el = document.createElement("div");
    el.className = "msg " + d.from;
    el.dataset.id = d.id;
    el.dataset.thread = d.thread;
    const who = document.createElement("div");
    who.className = "who";
    const name = document.createElement("span");
    name.textContent = d.from === "user" ? "you" : "pibot";
    const reply = document.createElement("button");
    reply.type = "button";
    reply.className = "threadbtn";
    reply.textContent = "Reply in thread";
    who.append(name, reply);
    const body = document.createElement("div");
    body.className = "body";
    const buttons = document.createElement("div");
    buttons.className = "buttons";
    const error = document.createElement("div");
    error.className = "error";
    el.append(who, body, buttons, error);
    const m = { data: d, el: el, pressed: false, shown: null };
    reply.addEventListener("click", () => startThread(m.data));
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
        box.appendChild(Object.assign(document.createElement("div"), { style: "flex-basis:100%;height:0" }));
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

  function upsert(d) {
    const follow = nearBottom();
    let m = state.msgs.get(d.id);
    if (!m) {
      m = makeMsg(d);
      state.msgs.set(d.id, m);
      ui.messages.appendChild(m.el);
      noteThread(d);
    } else {
      m.data = d;
    }
    m.el.hidden = d.thread !== state.view;
    fillMsg(m);
    if (follow) scrollDown();
    return m;
  }

  function reset() {
    state.msgs.clear();
    state.threads.clear();
    state.status.clear();
    ui.messages.replaceChildren();
    switchView("");
  }

  // ---- sending ----

  async function deliver(d) {
    const m = state.msgs.get(d.id);
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

  async function press(m, b, btn) {
    if (m.pressed) return;
    m.pressed = true;
    const all = m.el.querySelectorAll(".buttons button");
    all.forEach((x) => (x.disabled = true));
    btn.classList.add("pressed");
    try {
      await post("/api/action", { conv: conv, msg: m.data.id, data: b.id, id: randomId(12) });
    } catch (e) {
      m.pressed = false;
      all.forEach((x) => (x.disabled = false));
      btn.classList.remove("pressed");
      showToast("Not sent: " + e.message);
    }
  }

  // ---- events ----

  function renderStatus() {
    const text = state.status.get(state.view) || "";
    ui.status.textContent = text;
    ui.status.hidden = !text;
  }

  function handle(ev) {
    switch (ev.type) {
      case "reset":
        reset();
        break;
      case "ready":
        state.ready = true;
        scrollDown();
        break;
      case "msg":
        upsert(ev);
        break;
      case "status":
        state.status.set(ev.thread, ev.text);
        renderStatus();
        break;
      case "toast":
        if (state.ready) showToast(ev.text);
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
      ui.conn.textContent = "connected";
      ui.conn.classList.add("ok");
    };
    es.onmessage = (ev) => {
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
      ui.conn.textContent = "reconnecting…";
      ui.conn.classList.remove("ok");
      if (es.readyState === EventSource.CLOSED) {
        setTimeout(() => {
          if (state.es === es) connect();
        }, 2000);
      }
    };
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
  ui.tree.addEventListener("click", () => send("/tree"));
  ui.newconv.addEventListener("click", () => {
    conv = randomId(12);
    localStorage.setItem("pibot.conv", conv);
    state.last = "";
    reset();
    connect();
  });

  renderThreads();
  connect();
})();
