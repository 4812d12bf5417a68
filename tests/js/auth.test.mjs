// --api-key through the SDK: AuthenticationError without the key, success
// with it; /health stays open.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './server.mjs';

let server;
before(async () => { server = await startServer([], { PAGODA_API_KEY: 'sekrit-key' }); });
after(async () => { if (server) assert.equal(await server.stop(), 0); });

test('wrong key is a 401 AuthenticationError; the right key works', async () => {
  const bad = new OpenAI({ baseURL: `${server.baseURL}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(
    bad.completions.create({ model: 'stories260K', prompt: 'Hi', max_tokens: 2 }),
    (e) => e instanceof OpenAI.AuthenticationError && e.status === 401,
  );
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError);
  const good = new OpenAI({ baseURL: `${server.baseURL}/v1`, apiKey: 'sekrit-key', maxRetries: 0 });
  const r = await good.completions.create({ model: 'stories260K', prompt: 'Hi', max_tokens: 2 });
  assert.equal(r.usage.completion_tokens, 2);
  const health = await fetch(`${server.baseURL}/health`);
  assert.equal(health.status, 200);
  const tok = await fetch(`${server.baseURL}/tokenize`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'Hi' }),
  });
  assert.equal(tok.status, 401);
});
