// Pagoda chat UI: plain JS over the /v1/ws WebSocket protocol
// (docs/WEBSOCKET.md). No build step, no dependencies.
"use strict";

const $ = (id) => document.getElementById(id);
const state = {
  ws: null,
  connected: false,
  model: null,
  history: [],          // chat messages [{role, content}]
  current: null,        // the streaming reply: {id, el, textNode, text, lastSeq, sentAt, firstAt, tokens, mode, retried}
  reconnectDelay: 250,
  reconnectTimer: null,
  // The server's --api-key, when it has one: kept for this tab only
  // (sessionStorage), sent as the api_key query parameter of /v1/ws (a
  // browser WebSocket cannot set headers) and as a Bearer header on fetch.
  apiKey: sessionStorage.getItem("pagoda_api_key") || "",
  needKey: false,       // the server refused us for want of the right key
  // Ids of replies that have ended, most recent last: a Stop pressed as a
  // reply finishes reaches the server after it has forgotten the id, and
  // its "No request with id" answer is not news to show.
  ended: [],
};

function authHeaders() {
  return state.apiKey ? { Authorization: "Bearer " + state.apiKey } : {};
}

function newId() {
  if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
  return "id-" + Date.now().toString(36) + "-" + Math.random().toString(36).slice(2);
}

function setConn(on, text) {
  state.connected = on;
  const c = $("conn");
  c.textContent = text;
  c.className = "conn " + (on ? "on" : "off");
}

function send(obj) {
  if (state.ws && state.ws.readyState === WebSocket.OPEN) state.ws.send(JSON.stringify(obj));
}

function connect() {
  state.reconnectTimer = null;
  let url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/v1/ws";
  if (state.apiKey) url += "?api_key=" + encodeURIComponent(state.apiKey);
  const ws = new WebSocket(url);
  state.ws = ws;
  let opened = false;
  ws.onopen = () => {
    opened = true;
    setConn(true, "connected");
    state.reconnectDelay = 250;
    send({ type: "subscribe_stats", interval_ms: 500 });
    // A reply that was streaming when the connection dropped: pick it up
    // exactly where it stopped.
    if (state.current) send({ type: "resume", id: state.current.id, after: state.current.lastSeq });
  };
  ws.onmessage = (ev) => {
    let m;
    try { m = JSON.parse(ev.data); } catch (e) { return; }
    if (m.type === "delta") onDelta(m);
    else if (m.type === "done") onDone(m);
    else if (m.type === "error") onError(m);
    else if (m.type === "stats") onStats(m);
  };
  ws.onclose = async () => {
    if (state.ws !== ws) return;  // replaced (the key changed)
    state.ws = null;
    // Refused before opening: a 401 (missing or wrong key) is not worth
    // retrying until the key changes; the browser hides the upgrade's
    // status, so ask /v1/models, which answers under the same policy.
    if (!opened && (await keyRefused())) return;
    setConn(false, "reconnecting");
    state.reconnectTimer = setTimeout(connect, state.reconnectDelay);
    state.reconnectDelay = Math.min(state.reconnectDelay * 2, 5000);
  };
}

async function keyRefused() {
  try {
    const r = await fetch("/v1/models", { headers: authHeaders() });
    if (r.status !== 401) return false;
  } catch (e) {
    return false;
  }
  state.needKey = true;
  setConn(false, state.apiKey ? "wrong API key" : "API key required");
  $("model").textContent = "(API key required)";
  $("api_key").focus();
  return true;
}

// A new key: drop the connection (if any) and start over with it.
function setApiKey(key) {
  // The same key again (a second change event as the field loses focus)
  // while it is in use: keep the connection; dropping it would lose a
  // message sent meanwhile.
  if (key.trim() === state.apiKey && !state.needKey && state.ws) return;
  state.apiKey = key.trim();
  if (state.apiKey) sessionStorage.setItem("pagoda_api_key", state.apiKey);
  else sessionStorage.removeItem("pagoda_api_key");
  state.needKey = false;
  if (state.reconnectTimer) clearTimeout(state.reconnectTimer);
  const old = state.ws;
  state.ws = null;
  if (old) old.close();
  state.reconnectDelay = 250;
  setConn(false, "connecting");
  loadModel();
  connect();
}

function addMessage(role, text) {
  const el = document.createElement("div");
  el.className = "msg " + role;
  const body = document.createElement("span");
  body.className = "body";
  const node = document.createTextNode(text);
  body.appendChild(node);
  el.appendChild(body);
  $("messages").appendChild(el);
  el.scrollIntoView({ block: "end" });
  return { el, node };
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("stop").disabled = !busy;
}

function samplingFields() {
  const f = {
    temperature: parseFloat($("temperature").value),
    top_p: parseFloat($("top_p").value),
    max_tokens: parseInt($("max_tokens").value, 10) || 256,
  };
  if (state.model) f.model = state.model;
  return f;
}

function startRequest(userText, retried) {
  const mode = $("mode").value;
  const id = newId();
  const msg = Object.assign({ id }, samplingFields());
  if (mode === "chat") {
    msg.type = "chat";
    msg.messages = state.history.concat([{ role: "user", content: userText }]);
  } else {
    msg.type = "completion";
    msg.prompt = userText;
  }
  const { el, node } = addMessage("assistant", "");
  el.classList.add("streaming");
  state.current = { id, el, node, text: "", lastSeq: 0, sentAt: performance.now(), firstAt: null,
                    tokens: 0, mode, userText, retried: !!retried };
  setBusy(true);
  send(msg);
}

function onDelta(m) {
  const cur = state.current;
  if (!cur || m.id !== cur.id || m.seq <= cur.lastSeq) return;
  cur.lastSeq = m.seq;
  if (cur.firstAt === null) cur.firstAt = performance.now();
  // `text` is whole UTF-8 characters: appending never splits one (and JS
  // strings keep surrogate pairs together as long as we never slice).
  cur.text += m.text;
  cur.node.appendData(m.text);
  cur.tokens += m.token_ids.length;
  cur.el.scrollIntoView({ block: "end" });
}

function finishCurrent(metaText) {
  const cur = state.current;
  cur.el.classList.remove("streaming");
  const meta = document.createElement("span");
  meta.className = "meta";
  meta.textContent = metaText;
  cur.el.appendChild(meta);
  state.ended.push(cur.id);
  if (state.ended.length > 64) state.ended.shift();
  state.current = null;
  setBusy(false);
}

function onDone(m) {
  const cur = state.current;
  if (!cur || m.id !== cur.id) return;
  const now = performance.now();
  const ttft = cur.firstAt === null ? null : cur.firstAt - cur.sentAt;
  const secs = cur.firstAt === null ? 0 : (now - cur.firstAt) / 1000;
  const tps = secs > 0 && m.usage.completion_tokens > 1 ? (m.usage.completion_tokens - 1) / secs : null;
  const parts = [m.finish_reason === "abort" ? "stopped" : "finish: " + m.finish_reason,
                 m.usage.completion_tokens + " tokens"];
  if (ttft !== null) parts.push("TTFT " + ttft.toFixed(0) + " ms");
  if (tps !== null) parts.push(tps.toFixed(1) + " tokens/s");
  $("stat-reply").textContent = parts.slice(1).join(", ");
  if (cur.mode === "chat") {
    state.history.push({ role: "user", content: cur.userText });
    state.history.push({ role: "assistant", content: cur.text });
  }
  finishCurrent(parts.join(" · "));
}

function onError(m) {
  const cur = state.current;
  const message = (m.error && m.error.message) || "error";
  if (cur && m.id === cur.id) {
    // A model without a chat template: switch to plain completion once,
    // and say so.
    if (cur.mode === "chat" && !cur.retried && /chat template/i.test(message)) {
      cur.el.remove();
      state.current = null;
      $("mode").value = "completion";
      showModeNotice("This model has no chat template, so Mode switched to completion: your text is sent " +
                     "as a plain prompt and the model continues it. To chat, start the server with " +
                     "--chat-template FILE.");
      startRequest(cur.userText, true);
      return;
    }
    cur.el.classList.add("error");
    if (/No resumable stream/.test(message)) {
      finishCurrent("the stream was lost: " + message);
    } else {
      cur.node.appendData(message);
      finishCurrent("error " + (m.error.code || ""));
    }
    return;
  }
  if (m.id && state.ended.includes(m.id)) return;  // a late Stop (see state.ended)
  const { el } = addMessage("assistant", message);
  el.classList.add("error");
}

// Why the Mode changed by itself: shown under the Mode control while it
// stays on completion, and once in the conversation.
function showModeNotice(text) {
  const note = $("mode-note");
  note.textContent = text;
  note.hidden = false;
  addMessage("notice", text);
}

function fmt(v, digits) { return v === null || v === undefined ? "–" : v.toFixed(digits); }

function onStats(m) {
  $("stat-tps").textContent = fmt(m.generation_tokens_per_s, 1);
  if (m.mean_time_to_first_token_s !== null) $("stat-ttft").textContent = fmt(m.mean_time_to_first_token_s * 1000, 1);
  if (m.mean_inter_token_latency_s !== null) $("stat-itl").textContent = fmt(m.mean_inter_token_latency_s * 1000, 2);
  $("stat-kv").textContent = fmt(m.kv_cache_usage_perc * 100, 1);
  $("stat-running").textContent = m.num_requests_running;
  $("stat-waiting").textContent = m.num_requests_waiting;
}

async function loadModel() {
  try {
    const r = await fetch("/v1/models", { headers: authHeaders() });
    if (r.status === 401) {
      $("model").textContent = "(API key required)";
      return;
    }
    const j = await r.json();
    state.model = j.data[0].id;
    $("model").textContent = state.model;
  } catch (e) {
    $("model").textContent = "(model unknown)";
  }
}

function submit(ev) {
  if (ev) ev.preventDefault();
  const text = $("prompt").value;
  if (!text.trim() || state.current || !state.connected) return;
  addMessage("user", text);
  $("prompt").value = "";
  startRequest(text, false);
}

function init() {
  $("composer").addEventListener("submit", submit);
  $("prompt").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) submit(ev);
  });
  $("stop").addEventListener("click", () => {
    if (state.current) send({ type: "cancel", id: state.current.id });
  });
  $("clear").addEventListener("click", () => {
    if (state.current) send({ type: "cancel", id: state.current.id });
    state.history = [];
    $("messages").textContent = "";
  });
  for (const k of ["temperature", "top_p"]) {
    const input = $(k);
    input.addEventListener("input", () => { $(k + "-val").textContent = input.value; });
  }
  $("mode").addEventListener("change", () => { $("mode-note").hidden = $("mode").value !== "completion"; });
  $("api_key").value = state.apiKey;
  $("api_key").addEventListener("change", () => setApiKey($("api_key").value));
  loadModel();
  connect();
}

init();
