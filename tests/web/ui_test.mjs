// Headless Chromium test of the chat UI (web/) against a running
// `pagoda serve`: type a prompt, see tokens arrive, press Stop, check the
// notice that Mode switched to completion (stories260K has no chat
// template), check the stats panel, save a screenshot. Then, on a mocked /v1/ws stream, check
// that Chinese and emoji deltas render exactly while streaming.
// Last, against a server run with --api-key, the UI asks for the key,
// refuses a wrong one, and streams once the right one is entered.
// Usage: node ui_test.mjs URL SCREENSHOT_PNG KEY_URL KEY   (CHROMIUM=path to the browser)
import { chromium } from "playwright-core";

const [url, shot, keyUrl, key] = process.argv.slice(2);
if (!url || !shot || !keyUrl || !key) {
  console.error("usage: node ui_test.mjs URL SCREENSHOT_PNG KEY_URL KEY");
  process.exit(2);
}
const fail = (msg) => { throw new Error(msg); };
// On failure: what each page showed and what its script state was, so a
// failure on CI can be told apart (no key / not connected / no reply).
const pages = {};
async function describe(name, p) {
  try {
    return await p.evaluate((n) => ({
      page: n, conn: document.getElementById("conn").textContent,
      model: document.getElementById("model").textContent, mode: document.getElementById("mode").value,
      connected: state.connected, wsState: state.ws ? state.ws.readyState : null,
      current: state.current ? { id: state.current.id, lastSeq: state.current.lastSeq, mode: state.current.mode,
                                 text: state.current.text } : null,
      prompt: document.getElementById("prompt").value, log: window.__log,
      messages: [...document.querySelectorAll("#messages .msg")].map((m) => m.className + ": " + m.textContent),
    }), name);
  } catch (e) {
    return { page: name, error: String(e) };
  }
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 760 } });
  pages.open = page;
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(url);
  await page.waitForFunction(() => document.getElementById("conn").textContent === "connected", null, { timeout: 30000 });
  await page.waitForFunction(() => document.getElementById("model").textContent === "stories260K", null, { timeout: 30000 });

  await page.fill("#max_tokens", "480");
  // stories260K streams ~1000 tokens/s here, faster than a driver round
  // trip: an in-page observer records every state of the reply as deltas
  // land and presses Stop (a real click on the button) once 40 characters
  // have arrived. On a loaded machine the browser can fall so far behind
  // that all 480 tokens are generated before its Stop reaches the server
  // (the reply then ends as `length`, which is right for a late Stop): such
  // an attempt is checked like the others and the prompt is sent again, up
  // to 10 times.
  await page.evaluate(() => {
    const obs = new MutationObserver(() => {
      const el = document.querySelector(".msg.assistant.streaming .body");
      if (!el) return;
      const t = el.textContent;
      if (window.__states[window.__states.length - 1] !== t) window.__states.push(t);
      if (t.length >= 40 && !window.__stopped) {
        window.__stopped = true;
        document.getElementById("stop").click();
      }
    });
    obs.observe(document.getElementById("messages"), { subtree: true, childList: true, characterData: true });
  });
  let meta = "", text = "", states = [], attempts = 0;
  while (!/^stopped/.test(meta) && attempts < 10) {
    ++attempts;
    await page.evaluate(() => { window.__states = []; window.__stopped = false; });
    await page.fill("#prompt", "Once upon a time");
    await page.press("#prompt", "Enter");
    // Tokens arrive: the reply is seen growing while it streams.
    await page.waitForFunction(() => window.__stopped === true, null, { timeout: 30000 });
    await page.waitForFunction((n) => document.querySelectorAll(".msg.assistant:not(.streaming) .meta").length === n,
                               attempts, { timeout: 30000 });
    [meta, text] = await page.evaluate(() => {
      const all = document.querySelectorAll(".msg.assistant");
      const last = all[all.length - 1];
      return [last.querySelector(".meta").textContent, last.querySelector(".body").textContent];
    });
    states = await page.evaluate(() => window.__states);
    if (states.length < 3) fail(`the reply was seen in only ${states.length} states: not streamed`);
    for (let i = 1; i < states.length; ++i)
      if (!states[i].startsWith(states[i - 1]) || states[i].length <= states[i - 1].length)
        fail("the streamed text changed instead of growing");
    if (!text.startsWith(states[states.length - 1])) fail("the final text is not the streamed one");
    if (!/^stopped/.test(meta) && !/^finish: length · 480 tokens/.test(meta))
      fail(`the reply ended neither stopped nor at its 480 tokens: '${meta}'`);
  }
  const errorShown = await page.evaluate(() => [...document.querySelectorAll(".msg.error")].map((e) => e.textContent));
  if (errorShown.length) fail(`error shown in the conversation: ${JSON.stringify(errorShown)}`);
  if (!/^stopped/.test(meta)) fail(`in ${attempts} attempts Stop never arrived before the 480th token: '${meta}'`);
  const tokens = parseInt(meta.split("·")[1], 10);
  if (!(tokens > 0 && tokens < 480)) fail(`stopped reply has ${tokens} tokens (expected 0 < n < 480): '${meta}'`);
  // stories260K has no chat template: the UI switched Mode to completion
  // and says why, under the Mode control and in the conversation.
  const modeNote = await page.evaluate(() => {
    const n = document.getElementById("mode-note");
    return { hidden: n.hidden, visible: n.offsetParent !== null, text: n.textContent,
             mode: document.getElementById("mode").value,
             inChat: (document.querySelector(".msg.notice .body") || {}).textContent || "" };
  });
  if (modeNote.mode !== "completion") fail(`Mode is '${modeNote.mode}', expected the switch to completion`);
  if (modeNote.hidden || !modeNote.visible || !/no chat template/.test(modeNote.text))
    fail(`no visible notice of the switch: ${JSON.stringify(modeNote)}`);
  if (!/no chat template/.test(modeNote.inChat)) fail(`no notice in the conversation: '${modeNote.inChat}'`);
  if (await page.isEnabled("#stop")) fail("Stop stays enabled after the reply ended");
  if (!(await page.isEnabled("#send"))) fail("Send stays disabled after the reply ended");
  // The live stats panel has numbers.
  await page.waitForFunction(() => document.getElementById("stat-kv").textContent !== "–" &&
                                   document.getElementById("stat-ttft").textContent !== "–" &&
                                   document.getElementById("stat-tps").textContent !== "–", null, { timeout: 30000 });
  const stats = await page.evaluate(() => ({
    tps: document.getElementById("stat-tps").textContent,
    ttft: document.getElementById("stat-ttft").textContent,
    kv: document.getElementById("stat-kv").textContent,
  }));
  await page.screenshot({ path: shot, fullPage: true });
  console.log(`attempt ${attempts}: streamed ${text.length} chars in ${states.length} states, ${meta}; stats panel ${JSON.stringify(stats)}; screenshot ${shot}`);
  if (errors.length) fail("page errors: " + errors.join("; "));

  // Chinese and emoji while streaming, on a mocked socket: each delta's text
  // must show up exactly, never as U+FFFD or a broken surrogate pair.
  const mock = await browser.newPage();
  pages.mock = mock;
  const pieces = ["你", "好，", "世界", "🙂", "👩‍💻", " ok", "🎉"];
  let seen = [];
  await mock.routeWebSocket(/\/v1\/ws$/, (ws) => {
    ws.onMessage(async (raw) => {
      const m = JSON.parse(raw);
      if (m.type !== "chat" && m.type !== "completion") return;
      let seq = 0;
      for (const p of pieces) {
        ws.send(JSON.stringify({ type: "delta", id: m.id, seq: ++seq, index: 0, text: p, token_ids: [seq] }));
        const expected = pieces.slice(0, seq).join("");
        await mock.waitForFunction((e) => document.querySelector(".msg.assistant .body").textContent === e, expected,
                                   { timeout: 10000 });
        seen.push(expected);
      }
      ws.send(JSON.stringify({ type: "done", id: m.id, seq, index: 0, finish_reason: "stop", stop_reason: null,
                               usage: { prompt_tokens: 1, completion_tokens: seq, total_tokens: seq + 1 } }));
    });
  });
  await mock.route(/\/v1\/models$/, (r) => r.fulfill({ json: { object: "list", data: [{ id: "mock" }] } }));
  await mock.goto(url);
  await mock.waitForFunction(() => document.getElementById("conn").textContent === "connected");
  await mock.fill("#prompt", "说点什么 🙂");
  await mock.press("#prompt", "Enter");
  await mock.waitForSelector(".msg.assistant:not(.streaming) .meta", { timeout: 30000 });
  const final = await mock.textContent(".msg.assistant .body");
  if (final !== pieces.join("")) fail(`mocked stream rendered '${final}'`);
  if (seen.length !== pieces.length) fail("not every intermediate state was observed");
  const user = await mock.textContent(".msg.user .body");
  if (user !== "说点什么 🙂") fail(`user message rendered '${user}'`);
  console.log(`mocked CJK/emoji stream rendered exactly at each of ${seen.length} deltas: '${final}'`);

  // A server with --api-key: no key → asked for one (no reconnect loop);
  // a wrong key → said so; the right key → connected and streaming.
  const keyed = await browser.newPage();
  pages.keyed = keyed;
  await keyed.addInitScript(() => {
    window.__log = [];
    const log = (s) => window.__log.push(performance.now().toFixed(0) + " " + s);
    const Orig = window.WebSocket;
    window.WebSocket = class extends Orig {
      constructor(u) {
        super(u);
        log("ws new " + u);
        this.addEventListener("open", () => log("ws open"));
        this.addEventListener("close", (e) => log("ws close " + e.code));
      }
    };
    document.addEventListener("DOMContentLoaded", () => {
      const c = document.getElementById("conn");
      new MutationObserver(() => log("conn " + c.textContent)).observe(c, { childList: true, characterData: true, subtree: true });
      document.getElementById("prompt").addEventListener("keydown", (e) =>
        log(`keydown ${e.key} connected=${state.connected} current=${!!state.current}`));
    });
  });
  const keyedErrors = [];
  keyed.on("pageerror", (e) => keyedErrors.push(String(e)));
  await keyed.goto(keyUrl);
  const connIs = (t) => keyed.waitForFunction((e) => document.getElementById("conn").textContent === e, t,
                                                { timeout: 30000 });
  await connIs("API key required");
  await keyed.fill("#api_key", "not-the-key");
  await keyed.dispatchEvent("#api_key", "change");
  await connIs("wrong API key");
  await keyed.fill("#api_key", key);
  await keyed.dispatchEvent("#api_key", "change");
  await connIs("connected");
  await keyed.waitForFunction(() => document.getElementById("model").textContent === "stories260K", null,
                              { timeout: 30000 });
  await keyed.fill("#max_tokens", "24");
  await keyed.fill("#prompt", "Once upon a time");
  await keyed.press("#prompt", "Enter");
  await keyed.waitForSelector(".msg.assistant:not(.streaming) .meta", { timeout: 30000 });
  const keyedMeta = await keyed.textContent(".msg.assistant .meta");
  const keyedText = await keyed.textContent(".msg.assistant .body");
  if (!keyedText.trim()) fail(`no reply with the right key ('${keyedMeta}')`);
  if (/error/i.test(keyedMeta)) fail(`the keyed reply ended with an error: '${keyedMeta}'`);
  if (keyedErrors.length) fail("page errors (keyed server): " + keyedErrors.join("; "));
  console.log(`--api-key server: asked for the key, refused a wrong one, streamed ${keyedText.length} chars with it ('${keyedMeta}')`);
} catch (e) {
  for (const [name, p] of Object.entries(pages)) console.error("state:", JSON.stringify(await describe(name, p)));
  throw e;
} finally {
  await browser.close();
}
