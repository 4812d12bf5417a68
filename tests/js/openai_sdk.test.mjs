// The OpenAI API surface through the official `openai` npm client against a
// running `pagoda serve` (bundled stories260K, llama-2-chat template).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './server.mjs';

const MODEL = 'stories260K';
let server;
let client;

before(async () => {
  server = await startServer();
  client = new OpenAI({ baseURL: `${server.baseURL}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
});
after(async () => {
  if (server) assert.equal(await server.stop(), 0, 'clean shutdown');
});

async function collect(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

test('completion: greedy text, usage, finish_reason length', async () => {
  const r = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 12, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.model, MODEL);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].index, 0);
  assert.ok(r.choices[0].text.length > 0);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 12);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 12);
  // Greedy is deterministic: the same request gives the same text.
  const again = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 12, temperature: 0 });
  assert.equal(again.choices[0].text, r.choices[0].text);
});

test('completion stream: joined chunks equal the non-streamed text; include_usage', async () => {
  const body = { model: MODEL, prompt: 'Once upon a time', max_tokens: 16, temperature: 0 };
  const whole = await client.completions.create(body);
  const chunks = await collect(await client.completions.create({ ...body, stream: true, stream_options: { include_usage: true } }));
  const withChoices = chunks.filter((c) => c.choices.length > 0);
  assert.equal(withChoices.map((c) => c.choices[0].text).join(''), whole.choices[0].text);
  assert.equal(withChoices.at(-1).choices[0].finish_reason, 'length');
  for (const c of withChoices) assert.equal(c.usage, null);
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.deepEqual(last.usage, whole.usage);
});

test('chat: non-streamed and streamed agree; role first', async () => {
  const body = { model: MODEL, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: [{ type: 'text', text: 'Tell me a story' }] }], max_completion_tokens: 10, temperature: 0 };
  const r = await client.chat.completions.create(body);
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.ok(r.choices[0].message.content.length > 0);
  assert.equal(r.usage.completion_tokens, 10);
  const chunks = await collect(await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } }));
  assert.equal(chunks[0].object, 'chat.completion.chunk');
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  const text = chunks.filter((c) => c.choices.length).map((c) => c.choices[0].delta.content ?? '').join('');
  assert.equal(text, r.choices[0].message.content);
  assert.deepEqual(chunks.at(-1).usage, r.usage);
});

test('stop string: text ends before it, stop_reason names it', async () => {
  const free = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 40, temperature: 0 });
  const text = free.choices[0].text;
  // Pick a stop string from the greedy text itself (a word after the start).
  const m = text.slice(5).match(/[a-z]{3,}/);
  assert.ok(m, `no word in ${JSON.stringify(text)}`);
  const stop = m[0];
  const cut = text.indexOf(stop);
  for (const stream of [false, true]) {
    const req = { model: MODEL, prompt: 'Once upon a time', max_tokens: 40, temperature: 0, stop: [stop, 'zzzz'] };
    let got, finish, stopReason;
    if (stream) {
      const chunks = await collect(await client.completions.create({ ...req, stream: true }));
      got = chunks.map((c) => c.choices[0].text).join('');
      finish = chunks.at(-1).choices[0].finish_reason;
      stopReason = chunks.at(-1).choices[0].stop_reason;
    } else {
      const r = await client.completions.create(req);
      got = r.choices[0].text;
      finish = r.choices[0].finish_reason;
      stopReason = r.choices[0].stop_reason;
    }
    assert.equal(got, text.slice(0, cut), `stream=${stream}`);
    assert.equal(finish, 'stop');
    assert.equal(stopReason, stop);
  }
});

test('seed: same seed same text, sampling at temperature 1', async () => {
  const body = { model: MODEL, prompt: 'Once upon a time', max_tokens: 24, temperature: 1.0, seed: 1234 };
  const a = await client.completions.create(body);
  const b = await client.completions.create(body);
  assert.equal(a.choices[0].text, b.choices[0].text);
  const texts = new Set();
  for (const seed of [1, 2, 3, 4]) texts.add((await client.completions.create({ ...body, seed })).choices[0].text);
  assert.ok(texts.size > 1, 'different seeds should give different samples');
});

test('batched prompts: one choice per prompt, in order', async () => {
  const prompts = ['Once upon a time', 'The cat'];
  const r = await client.completions.create({ model: MODEL, prompt: prompts, max_tokens: 6, temperature: 0 });
  assert.equal(r.choices.length, 2);
  for (let i = 0; i < 2; i++) {
    const single = await client.completions.create({ model: MODEL, prompt: prompts[i], max_tokens: 6, temperature: 0 });
    assert.equal(r.choices[i].index, i);
    assert.equal(r.choices[i].text, single.choices[0].text);
  }
  assert.equal(r.usage.completion_tokens, 12);
});

test('echo: the prompt comes first', async () => {
  const r = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 5, temperature: 0, echo: true });
  const plain = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 5, temperature: 0 });
  assert.equal(r.choices[0].text, 'Once upon a time' + plain.choices[0].text);
});

test('errors are the SDK typed errors with param', async () => {
  await assert.rejects(
    client.completions.create({ model: MODEL, prompt: 'Hi', temperature: -1 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'temperature',
  );
  await assert.rejects(
    client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], top_logprobs: 30, logprobs: true }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'top_logprobs',
  );
  await assert.rejects(
    client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'strin' } } } }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'response_format' && /unknown type 'strin'/.test(e.message),
  );
  await assert.rejects(
    client.completions.create({ model: 'gpt-4', prompt: 'Hi' }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404,
  );
});

// ---- these need the engine side of issue 5 (n > 1, logprobs) ----------

test('n=3: three choices, each with its index, streamed and not', async () => {
  const body = { model: MODEL, prompt: 'Once upon a time', max_tokens: 8, temperature: 1.0, seed: 7, n: 3 };
  const r = await client.completions.create(body);
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  assert.equal(r.usage.completion_tokens, 24);
  for (const c of r.choices) assert.equal(c.finish_reason, 'length');
  const chunks = await collect(await client.completions.create({ ...body, stream: true }));
  const texts = ['', '', ''];
  const finished = new Set();
  for (const c of chunks) {
    for (const ch of c.choices) {
      texts[ch.index] += ch.text;
      if (ch.finish_reason) finished.add(ch.index);
    }
  }
  assert.deepEqual([...finished].sort(), [0, 1, 2]);
  assert.deepEqual(texts, r.choices.map((c) => c.text), 'same seed, same three samples');
  const chat = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, n: 3, temperature: 1, seed: 3 });
  assert.deepEqual(chat.choices.map((c) => c.index), [0, 1, 2]);
});

test('logprobs: completions object and chat content, top-k sorted, sampled token included', async () => {
  const r = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 6, temperature: 0, logprobs: 3 });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, 6);
  assert.equal(lp.tokens.join(''), r.choices[0].text);
  assert.equal(lp.text_offset[0], 0);
  for (let i = 0; i < 6; i++) {
    assert.ok(lp.token_logprobs[i] <= 0);
    const top = Object.entries(lp.top_logprobs[i]);
    assert.ok(top.length >= 3 && top.length <= 4);
    // Greedy: the sampled token is the most likely one.
    const best = Math.max(...top.map(([, v]) => v));
    assert.ok(Math.abs(best - lp.token_logprobs[i]) < 1e-4);
    if (i > 0) assert.equal(lp.text_offset[i], lp.text_offset[i - 1] + [...lp.tokens[i - 1]].length);
  }
  const c = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 2 });
  const content = c.choices[0].logprobs.content;
  assert.equal(content.length, 4);
  for (const t of content) {
    assert.equal(t.top_logprobs.length, 2);
    assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
    assert.deepEqual(t.bytes, [...Buffer.from(t.token, 'utf8')]);
  }
  assert.equal(content.map((t) => t.token).join(''), c.choices[0].message.content);
});
