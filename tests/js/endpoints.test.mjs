// The non-OpenAI routes over plain fetch against a running `pagoda serve`:
// /tokenize, /detokenize, /generate (plain and NUL-delimited stream),
// /version, /openapi.json, /docs, CORS with --allowed-origins.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from './server.mjs';

let server;
before(async () => { server = await startServer(['--allowed-origins', 'http://ok.example']); });
after(async () => { if (server) assert.equal(await server.stop(), 0); });

const post = (path, body, headers = {}) =>
  fetch(`${server.baseURL}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

test('tokenize / detokenize round trip; chat form counts like the chat request', async () => {
  const t = await (await post('/tokenize', { prompt: 'Once upon a time' })).json();
  assert.equal(t.count, t.tokens.length);
  assert.equal(t.tokens[0], 1, 'BOS first');
  assert.equal(t.max_model_len, 512);
  const d = await (await post('/detokenize', { tokens: t.tokens.slice(1) })).json();
  assert.equal(d.prompt, 'Once upon a time');
  const msgs = [{ role: 'user', content: 'Hi' }];
  const tc = await (await post('/tokenize', { messages: msgs })).json();
  const chat = await (await post('/v1/chat/completions', { messages: msgs, max_tokens: 1 })).json();
  assert.equal(tc.count, chat.usage.prompt_tokens);
  const bad = await post('/detokenize', { tokens: [1, 99999] });
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).error.param, 'tokens');
});

test('/generate: prompt + completion, and the NUL-delimited stream ends with the same text', async () => {
  const body = { prompt: 'Once upon a time', max_tokens: 10, temperature: 0 };
  const r = await (await post('/generate', body)).json();
  assert.equal(r.text.length, 1);
  assert.ok(r.text[0].startsWith('Once upon a time'));
  const completion = await (await post('/v1/completions', body)).json();
  assert.equal(r.text[0], 'Once upon a time' + completion.choices[0].text);
  const raw = await (await post('/generate', { ...body, stream: true })).text();
  const parts = raw.split('\0').filter((s) => s.length);
  // Updates may coalesce (a slow reader gets fewer): each is the whole text
  // so far, so each extends the previous one.
  assert.ok(parts.length >= 1);
  assert.ok(raw.endsWith('\0'));
  for (let i = 1; i < parts.length; i++) assert.ok(JSON.parse(parts[i]).text[0].startsWith(JSON.parse(parts[i - 1]).text[0]));
  assert.deepEqual(JSON.parse(parts.at(-1)), r);
});

test('/version, /openapi.json, /docs', async () => {
  assert.ok((await (await fetch(`${server.baseURL}/version`)).json()).version);
  const spec = await (await fetch(`${server.baseURL}/openapi.json`)).json();
  assert.match(spec.openapi, /^3\./);
  assert.ok(spec.paths['/v1/chat/completions'].post);
  const docs = await fetch(`${server.baseURL}/docs`);
  assert.match(docs.headers.get('content-type'), /text\/html/);
  assert.match(await docs.text(), /\/v1\/completions/);
});

test('CORS: allowed origin echoed, preflight answered, other origins get nothing', async () => {
  const pre = await fetch(`${server.baseURL}/v1/completions`, {
    method: 'OPTIONS',
    headers: { origin: 'http://ok.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' },
  });
  assert.equal(pre.status, 200);
  assert.equal(pre.headers.get('access-control-allow-origin'), 'http://ok.example');
  assert.match(pre.headers.get('access-control-allow-methods'), /POST/);
  const r = await post('/v1/completions', { prompt: 'Hi', max_tokens: 2 }, { origin: 'http://ok.example' });
  assert.equal(r.headers.get('access-control-allow-origin'), 'http://ok.example');
  const s = await post('/v1/completions', { prompt: 'Hi', max_tokens: 2, stream: true }, { origin: 'http://ok.example' });
  assert.equal(s.headers.get('access-control-allow-origin'), 'http://ok.example');
  await s.text();
  const other = await post('/v1/completions', { prompt: 'Hi', max_tokens: 2 }, { origin: 'http://evil.example' });
  assert.equal(other.headers.get('access-control-allow-origin'), null);
  const badPre = await fetch(`${server.baseURL}/v1/completions`, { method: 'OPTIONS', headers: { origin: 'http://evil.example' } });
  assert.equal(badPre.status, 400);
});
