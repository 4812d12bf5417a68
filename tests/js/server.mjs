// Starts `pagoda serve` (the bundled stories260K) on 127.0.0.1, port 0, and
// resolves once it prints "Pagoda listening on http://HOST:PORT" (an event,
// not a sleep). PAGODA_BIN: the binary; PAGODA_CHAT_TEMPLATE: a chat
// template file (stories260K has none).
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const sourceDir = path.resolve(here, '..', '..');
export const pagodaBin = process.env.PAGODA_BIN ?? path.join(sourceDir, 'build', 'pagoda');
export const chatTemplate =
  process.env.PAGODA_CHAT_TEMPLATE ?? path.resolve(sourceDir, '..', 'shared', 'chat_templates', 'llama-2-chat.jinja');

// opts.model: a model directory (default: the bundled one); opts.chatTemplate:
// a template file, or null for the model's own (default: PAGODA_CHAT_TEMPLATE).
export function startServer(extraArgs = [], env = {}, opts = {}) {
  return new Promise((resolve, reject) => {
    const template = opts.chatTemplate === undefined ? chatTemplate : opts.chatTemplate;
    const args = ['serve', ...(opts.model ? [opts.model] : []), '--host', '127.0.0.1', '--port', '0',
      ...(template ? ['--chat-template', template] : []), ...extraArgs];
    const child = spawn(pagodaBin, args, {
      cwd: sourceDir,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`pagoda serve did not start in 120 s; stderr:\n${err}`));
    }, 120_000);
    child.stderr.on('data', (d) => { err += d; });
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/Pagoda listening on (http:\/\/[^\s]+)/);
      if (m) {
        clearTimeout(timer);
        resolve({
          baseURL: m[1],
          stop: () => new Promise((res) => {
            if (child.exitCode !== null) return res(child.exitCode);
            child.once('exit', (code) => res(code));
            child.kill('SIGTERM');
          }),
        });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`pagoda serve exited (${code}) before listening; stderr:\n${err}`));
    });
  });
}
