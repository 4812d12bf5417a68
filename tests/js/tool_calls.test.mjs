// Tool calls through the official `openai` npm client against `pagoda serve`
// with --enable-auto-tool-choice --tool-call-parser hermes: a tiny Qwen2
// model built to always answer with one Hermes-style call (tool_model.mjs;
// Qwen2.5's tokenizer and chat template), so the parser, the response shapes
// (streamed and not), the tool and assistant tool_calls history,
// tool_choice "required" / named (guided decoding) and tool_choice's
// validation are checked through the real server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import OpenAI from 'openai';
import { startServer } from './server.mjs';
import { writeToolModel, TOOL_CALL_ARGS, TOOL_CALL_TEXT } from './tool_model.mjs';

const MODEL = 'tool-model';
const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Get the current weather in a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
      required: ['city'],
    },
  },
}];
const user = { role: 'user', content: 'What is the weather in Paris?' };
let modelDir;
let server;
let client;

before(async () => {
  modelDir = writeToolModel();
  server = await startServer(['--served-model-name', MODEL, '--enable-auto-tool-choice', '--tool-call-parser', 'hermes'],
    {}, { model: modelDir, chatTemplate: null });
  client = new OpenAI({ baseURL: `${server.baseURL}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
});
after(async () => {
  if (server) assert.equal(await server.stop(), 0, 'clean shutdown');
  if (modelDir) fs.rmSync(modelDir, { recursive: true, force: true });
});

test('tool call, non-streamed: message.tool_calls, content null, finish_reason tool_calls', async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages: [user], tools, temperature: 0 });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.role, 'assistant');
  assert.equal(c.message.content, null);
  assert.equal(c.message.tool_calls.length, 1);
  const call = c.message.tool_calls[0];
  assert.match(call.id, /^chatcmpl-tool-[0-9a-f]{32}$/);
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  assert.equal(call.function.arguments, TOOL_CALL_ARGS);
  assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris', unit: 'celsius' });
});

test('tool call, streamed: id/type/name first, then argument fragments; the SDK assembles the call', async () => {
  const body = { model: MODEL, messages: [user], tools, tool_choice: 'auto', temperature: 0 };
  const chunks = [];
  for await (const c of await client.chat.completions.create({ ...body, stream: true })) chunks.push(c);
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  const deltas = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
  assert.ok(deltas.length >= 3, `${deltas.length} tool-call deltas`);
  assert.match(deltas[0].id, /^chatcmpl-tool-/);
  assert.equal(deltas[0].type, 'function');
  assert.equal(deltas[0].function.name, 'get_weather');
  for (const d of deltas.slice(1)) {
    assert.equal(d.index, 0);
    assert.equal(d.id, undefined);
    assert.equal(d.function.name, undefined);
  }
  assert.equal(deltas.map((d) => d.function.arguments).join(''), TOOL_CALL_ARGS);
  const content = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
  assert.equal(content, '');
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'tool_calls');
  // The SDK's stream helper accumulates the deltas into the same message.
  const final = await client.chat.completions.stream(body).finalChatCompletion();
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  assert.equal(final.choices[0].message.tool_calls[0].function.name, 'get_weather');
  assert.equal(final.choices[0].message.tool_calls[0].function.arguments, TOOL_CALL_ARGS);
});

test('round trip: the assistant tool_calls and a tool message go back into the chat', async () => {
  const first = await client.chat.completions.create({ model: MODEL, messages: [user], tools, temperature: 0 });
  const call = first.choices[0].message.tool_calls[0];
  const messages = [user, first.choices[0].message,
    { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ temperature: 18, sky: 'clear' }) }];
  const second = await client.chat.completions.create({ model: MODEL, messages, tools, temperature: 0 });
  // The history is rendered (Qwen2.5: the call in the assistant turn, the
  // result in a <tool_response> user turn): a longer prompt.
  assert.ok(second.usage.prompt_tokens > first.usage.prompt_tokens + 20,
    `${second.usage.prompt_tokens} vs ${first.usage.prompt_tokens}`);
  assert.equal(second.choices[0].finish_reason, 'tool_calls');
  // Arguments that are not JSON go to the template as {} (with a warning),
  // as vLLM's chat-message parser does: the same prompt as arguments "{}",
  // shorter than the real call's.
  const bad = structuredClone(messages);
  bad[1].tool_calls[0].function.arguments = '{oops';
  const empty = structuredClone(messages);
  empty[1].tool_calls[0].function.arguments = '{}';
  const rb = await client.chat.completions.create({ model: MODEL, messages: bad, tools, max_tokens: 1 });
  const re = await client.chat.completions.create({ model: MODEL, messages: empty, tools, max_tokens: 1 });
  assert.equal(rb.usage.prompt_tokens, re.usage.prompt_tokens);
  assert.ok(rb.usage.prompt_tokens < second.usage.prompt_tokens,
    `${rb.usage.prompt_tokens} vs ${second.usage.prompt_tokens}`);
});

test('tool_choice none: the text is content, no calls', async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages: [user], tools, tool_choice: 'none', temperature: 0 });
  assert.equal(r.choices[0].message.content, TOOL_CALL_TEXT);
  assert.deepEqual(r.choices[0].message.tool_calls, []);
  assert.equal(r.choices[0].finish_reason, 'stop');
});

// tool_choice "required" / named: guided decoding to the tools' schema. The
// bigram model, constrained, writes the lowest allowed token id where its
// chain has no successor; enums keep its arguments finite.
const forcedTools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', enum: ['Paris', 'Rome'] }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
      required: ['city', 'unit'],
    },
  },
}, { type: 'function', function: { name: 'now' } }];
const named = { type: 'function', function: { name: 'get_weather' } };

// The arguments validate against get_weather's parameters.
function checkWeatherArgs(args) {
  const v = JSON.parse(args);
  assert.deepEqual(Object.keys(v).sort(), ['city', 'unit']);
  assert.ok(['Paris', 'Rome'].includes(v.city), args);
  assert.ok(['celsius', 'fahrenheit'].includes(v.unit), args);
}

function toolDeltas(chunks) {
  return chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
}

test('tool_choice named, non-streamed: one call, content "", finish_reason the engine\'s (vLLM)', async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages: [user], tools: forcedTools, tool_choice: named, temperature: 0, max_tokens: 100 });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'stop');
  assert.equal(c.message.content, '');
  assert.equal(c.message.tool_calls.length, 1);
  const call = c.message.tool_calls[0];
  assert.match(call.id, /^chatcmpl-tool-[0-9a-f]{32}$/);
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  checkWeatherArgs(call.function.arguments);
  assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris', unit: 'celsius' });
});

test('tool_choice named, streamed: the name first, then argument fragments; finish_reason tool_calls', async () => {
  const body = { model: MODEL, messages: [user], tools: forcedTools, tool_choice: named, temperature: 0, max_tokens: 100 };
  const whole = await client.chat.completions.create(body);
  const chunks = [];
  for await (const c of await client.chat.completions.create({ ...body, stream: true })) chunks.push(c);
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  const deltas = toolDeltas(chunks);
  assert.ok(deltas.length >= 2, `${deltas.length} tool-call deltas`);
  assert.match(deltas[0].id, /^chatcmpl-tool-/);
  assert.equal(deltas[0].type, 'function');
  assert.equal(deltas[0].function.name, 'get_weather');
  for (const d of deltas.slice(1)) {
    assert.equal(d.index, 0);
    assert.equal(d.id, undefined);
    assert.equal(d.function.name, undefined);
  }
  const args = deltas.map((d) => d.function.arguments).join('');
  assert.equal(args, whole.choices[0].message.tool_calls[0].function.arguments);
  assert.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), '');
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'tool_calls');
  const final = await client.chat.completions.stream(body).finalChatCompletion();
  assert.equal(final.choices[0].message.tool_calls[0].function.name, 'get_weather');
  checkWeatherArgs(final.choices[0].message.tool_calls[0].function.arguments);
});

test('tool_choice required, streamed: one call per list item, each validating', async () => {
  // The model never closes the list (its lowest allowed token after an item
  // is ","): max_tokens cuts it; every item before the last is whole.
  const body = { model: MODEL, messages: [user], tools: forcedTools, tool_choice: 'required', temperature: 0, max_tokens: 200 };
  const chunks = [];
  for await (const c of await client.chat.completions.create({ ...body, stream: true })) chunks.push(c);
  const calls = [];
  for (const d of toolDeltas(chunks)) {
    if (d.id !== undefined) {
      assert.equal(d.index, calls.length);
      assert.match(d.id, /^chatcmpl-tool-/);
      assert.equal(d.type, 'function');
      calls.push({ name: d.function.name, args: d.function.arguments });
    } else {
      assert.equal(d.index, calls.length - 1);
      assert.equal(d.function.name, undefined);
      calls[d.index].args += d.function.arguments;
    }
  }
  assert.ok(calls.length >= 2, `${calls.length} calls`);
  for (const c of calls.slice(0, -1)) {
    assert.equal(c.name, 'get_weather');
    checkWeatherArgs(c.args);
  }
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'tool_calls');
  // Non-streamed, an output that is not a whole list is vLLM's 400.
  await assert.rejects(client.chat.completions.create(body), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.param, 'tool_choice');
    assert.match(e.message, /not a list of tool calls.*not complete JSON/);
    return true;
  });
});

test('tool_choice required / named with another guided field: 400 naming it', async () => {
  for (const choice of ['required', named]) {
    await assert.rejects(client.chat.completions.create({ model: MODEL, messages: [user], tools: forcedTools, tool_choice: choice,
      response_format: { type: 'json_object' } }), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.param, 'response_format');
      assert.match(e.message, /cannot be combined with 'response_format'/);
      return true;
    });
  }
});

test('without --enable-auto-tool-choice: tools (tool_choice auto) are a 400 in vLLM words', async () => {
  const plain = await startServer(['--served-model-name', MODEL], {}, { model: modelDir, chatTemplate: null });
  try {
    const c = new OpenAI({ baseURL: `${plain.baseURL}/v1`, apiKey: 'unused', maxRetries: 0 });
    await assert.rejects(c.chat.completions.create({ model: MODEL, messages: [user], tools }), (e) => {
      assert.equal(e.status, 400);
      assert.match(e.message, /"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set/);
      return true;
    });
    const r = await c.chat.completions.create({ model: MODEL, messages: [user], tools, tool_choice: 'none', temperature: 0 });
    assert.equal(r.choices[0].message.content, TOOL_CALL_TEXT);
    // A named function needs no flag (vLLM).
    const n = await c.chat.completions.create({ model: MODEL, messages: [user], tools: forcedTools, tool_choice: named, temperature: 0, max_tokens: 100 });
    checkWeatherArgs(n.choices[0].message.tool_calls[0].function.arguments);
  } finally {
    assert.equal(await plain.stop(), 0);
  }
});
