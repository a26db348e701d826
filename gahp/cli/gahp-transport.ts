/**
 * The two ends GahpClient (gahp-client.ts) can speak to: a GAHP on a pair of streams (the
 * in-process one, or any test double) and bin/boinc-gahp as a child process. Either way the
 * GAHP's output is framed into protocol lines exactly as the GAHP frames its input.
 */
import type * as childProcess from 'node:child_process';
import { createRequire } from 'node:module';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LineFramer, type LineEvent } from '../protocol/line-reader.js';

/** What GahpClient needs of the other end: lines out, lines in, and an end. */
export interface Transport {
  write(line: string): void;
  onLine(listener: (line: string) => void): void;
  onClose(listener: (why: string) => void): void;
  /** Ends stdin of the GAHP (EOF = QUIT) and waits for it to exit; resolves with its exit code. */
  end(): Promise<number | null>;
  kill(): void;
}

/** The repository root (holds bin/boinc-gahp), found from this module's location in src or dist. */
function repoRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = path.join(dir, 'package.json');
    if (fs.existsSync(pkg)) {
      try {
        if ((JSON.parse(fs.readFileSync(pkg, 'utf8')) as { name?: unknown }).name === 'boinc-gahp') return dir;
      } catch {
        /* keep looking */
      }
    }
    const up = path.dirname(dir);
    if (up === dir) throw new Error('cannot find the boinc-gahp package root');
    dir = up;
  }
}

function gahpBinPath(): string {
  return path.join(repoRoot(), 'bin', 'boinc-gahp');
}

/** Holds lines that arrive before anyone listens (the in-process GAHP prints its banner at once). */
class LineRelay {
  private listener: ((line: string) => void) | undefined;
  private held: string[] = [];
  emit(line: string): void {
    if (this.listener) this.listener(line);
    else this.held.push(line);
  }
  listen(f: (line: string) => void): void {
    this.listener = f;
    const held = this.held;
    this.held = [];
    for (const l of held) f(l);
  }
}

/**
 * Feeds the GAHP's output to onLine as protocol lines, framed by the very LineFramer the
 * GAHP reads its input with: an LF ends a line unless a backslash escapes it (a token may
 * hold an escaped newline), and bytes are decoded as UTF-8 per line, never per chunk (a
 * character split across two reads stays whole). A line the framer refuses (not UTF-8,
 * overlong) is passed on as a description in brackets, which matches no reply.
 */
function readProtocolLines(stream: NodeJS.ReadableStream, onLine: (line: string) => void): void {
  const framer = new LineFramer();
  const deliver = (events: LineEvent[]) => {
    for (const ev of events) {
      if (ev.kind === 'line') onLine(ev.text);
      else onLine(ev.kind === 'overlong' ? `[a line of ${ev.bytes} bytes, over the limit]` : '[a line that is not valid UTF-8]');
    }
  };
  stream.on('data', (chunk: Buffer | string) => deliver(framer.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)));
  stream.on('end', () => deliver(framer.end()));
}

/**
 * A GAHP at the other end of two streams: `toGahp` is its input, `fromGahp` its output.
 * `exited` (default: the output ends) says when and how it stopped; `kill` stops it.
 */
export function streamTransport(
  toGahp: NodeJS.WritableStream,
  fromGahp: NodeJS.ReadableStream,
  control: { exited?: Promise<{ code: number | null; why: string }>; kill?: () => void } = {},
): Transport {
  const lines = new LineRelay();
  const closeListeners: Array<(why: string) => void> = [];
  readProtocolLines(fromGahp, (l) => lines.emit(l));
  const exited = control.exited ?? new Promise((resolve) => fromGahp.once('end', () => resolve({ code: null, why: 'the GAHP closed its output' })));
  void exited.then(({ why }) => closeListeners.forEach((f) => f(why)));
  return {
    write: (line) => toGahp.write(line + '\n'),
    onLine: (f) => lines.listen(f),
    onClose: (f) => closeListeners.push(f),
    end: async () => {
      toGahp.end();
      return (await exited).code;
    },
    kill: () => control.kill?.(),
  };
}

/** bin/boinc-gahp as a child process, exactly what HTCondor starts. */
export function childTransport(args: string[], opts: { env?: NodeJS.ProcessEnv; onStderr?: (text: string) => void }): Transport {
  // node:child_process (and net, dgram) load only when a GAHP is spawned: the
  // gridmanager's GAHP never does (docs/architecture.md).
  const { spawn } = createRequire(import.meta.url)('node:child_process') as typeof childProcess;
  const child = spawn(process.execPath, [gahpBinPath(), ...args], {
    env: { ...process.env, ...opts.env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const lines = new LineRelay();
  const closeListeners: Array<(why: string) => void> = [];
  readProtocolLines(child.stdout, (l) => lines.emit(l));
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d: string) => opts.onStderr?.(d));
  child.stdin.on('error', () => undefined);
  const exited = new Promise<number | null>((resolve) => {
    child.on('exit', (code, signal) => {
      closeListeners.forEach((f) => f(`the GAHP exited (${signal ?? `code ${code}`})`));
      resolve(code);
    });
    child.on('error', (err) => {
      closeListeners.forEach((f) => f(`cannot start the GAHP: ${err.message}`));
      resolve(null);
    });
  });
  return {
    write: (line) => child.stdin.write(line + '\n'),
    onLine: (f) => lines.listen(f),
    onClose: (f) => closeListeners.push(f),
    end: async () => {
      child.stdin.end();
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
    kill: () => child.kill('SIGKILL'),
  };
}
