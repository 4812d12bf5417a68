// A tiny Qwen2 model whose greedy output is known: a "bigram" model (one
// layer whose attention and MLP weights are zero, so the last hidden state
// is the current token's embedding) with one-hot embeddings for the tokens
// of CHAIN and an lm_head that maps each of them to the next one. After the
// chat template's "<|im_start|>assistant\n" it writes
//   <tool_call>{"name":"get_weather","arguments":{"city":"Paris","unit":"celsius"}}</tool_call>
// and <|im_end|> (EOS), whatever the prompt. Written into a temporary
// directory with shared/models/tiny-random-qwen2-chat's tokenizer (Qwen2.5's,
// with its chat template). Each token of CHAIN but the last must occur once
// (a token has one embedding, so one successor); the ids below are a
// segmentation of the text into distinct Qwen2.5 tokens.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sourceDir } from './server.mjs';

export const TOOL_CALL_ARGS = '{"city":"Paris","unit":"celsius"}';
export const TOOL_CALL_TEXT = `<tool_call>{"name":"get_weather","arguments":${TOOL_CALL_ARGS}}</tool_call>`;
// "\n" (the prompt's last token), <tool_call>, the call's JSON, </tool_call>, <|im_end|>.
const CHAIN = [198, 151657, 4913, 606, 3252, 455, 69364, 497, 56693, 1984, 2831, 22317, 8926, 788,
  67681, 41860, 2198, 3843, 1, 2974, 3672, 6321, 355, 30975, 151658, 151645];
const HIDDEN = 32;
const VOCAB = 151936;

function tensor(shape, fill) {
  const a = new Float32Array(shape.reduce((x, y) => x * y, 1));
  if (fill) a.fill(fill);
  return { shape, data: a };
}

function writeSafetensors(file, tensors) {
  const header = {};
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    const bytes = t.data.byteLength;
    header[name] = { dtype: 'F32', shape: t.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  const fd = fs.openSync(file, 'w');
  fs.writeSync(fd, len);
  fs.writeSync(fd, Buffer.from(json, 'utf8'));
  for (const t of Object.values(tensors)) fs.writeSync(fd, Buffer.from(t.data.buffer));
  fs.closeSync(fd);
}

// Returns the model directory (a fresh temporary one).
export function writeToolModel() {
  const src = path.resolve(sourceDir, '..', 'shared', 'models', 'tiny-random-qwen2-chat');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pagoda-tool-model-'));
  for (const f of ['tokenizer.json', 'tokenizer_config.json', 'generation_config.json'])
    fs.copyFileSync(path.join(src, f), path.join(dir, f));
  const config = JSON.parse(fs.readFileSync(path.join(src, 'config.json'), 'utf8'));
  Object.assign(config, { num_hidden_layers: 1, tie_word_embeddings: false, torch_dtype: 'float32' });
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config, null, 1));
  const heads = config.num_attention_heads;
  const kvHeads = config.num_key_value_heads;
  const headDim = HIDDEN / heads;
  const inter = config.intermediate_size;
  if (config.hidden_size !== HIDDEN || config.vocab_size !== VOCAB) throw new Error('unexpected config');
  const embed = tensor([VOCAB, HIDDEN]);
  const lmHead = tensor([VOCAB, HIDDEN]);
  for (let i = 0; i + 1 < CHAIN.length; ++i) {
    embed.data[CHAIN[i] * HIDDEN + i] = 1;
    lmHead.data[CHAIN[i + 1] * HIDDEN + i] = 10;
  }
  const p = 'model.layers.0.';
  writeSafetensors(path.join(dir, 'model.safetensors'), {
    'model.embed_tokens.weight': embed,
    'lm_head.weight': lmHead,
    'model.norm.weight': tensor([HIDDEN], 1),
    [`${p}input_layernorm.weight`]: tensor([HIDDEN], 1),
    [`${p}post_attention_layernorm.weight`]: tensor([HIDDEN], 1),
    [`${p}self_attn.q_proj.weight`]: tensor([heads * headDim, HIDDEN]),
    [`${p}self_attn.q_proj.bias`]: tensor([heads * headDim]),
    [`${p}self_attn.k_proj.weight`]: tensor([kvHeads * headDim, HIDDEN]),
    [`${p}self_attn.k_proj.bias`]: tensor([kvHeads * headDim]),
    [`${p}self_attn.v_proj.weight`]: tensor([kvHeads * headDim, HIDDEN]),
    [`${p}self_attn.v_proj.bias`]: tensor([kvHeads * headDim]),
    [`${p}self_attn.o_proj.weight`]: tensor([HIDDEN, heads * headDim]),
    [`${p}mlp.gate_proj.weight`]: tensor([inter, HIDDEN]),
    [`${p}mlp.up_proj.weight`]: tensor([inter, HIDDEN]),
    [`${p}mlp.down_proj.weight`]: tensor([HIDDEN, inter]),
  });
  return dir;
}
