// How bin/* load the compiled program (dist/). In a checkout before the first build, or
// without its dependencies, they say in one line how to build instead of printing node's
// ERR_MODULE_NOT_FOUND stack trace.
import * as fs from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

/** The module at `relative` (to the checkout or package root), for `command`'s messages. */
export async function loadBuilt(command, relative) {
  const url = new URL(`../${relative}`, import.meta.url);
  try {
    return await import(url.href);
  } catch (err) {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND') throw err;
    const what = fs.existsSync(fileURLToPath(url)) ? `a module is missing (${String(err.message).split('\n')[0]})` : 'not built yet';
    process.stderr.write(`${command}: ${what}: run "npm ci" (or "npm run build") in ${root}\n`);
    return process.exit(2);
  }
}
