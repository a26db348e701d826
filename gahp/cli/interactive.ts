/**
 * Interactive mode: what `boinc-gahp` does when stdin is a terminal. A prompt with history
 * in front of an in-process GAHP speaking the very same protocol HTCondor speaks: what you
 * type is sent as a request line; request ids are optional (one is assigned when missing);
 * results are fetched (RESULTS) and printed as soon as the GAHP announces them.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { joinTokens, splitTokens } from '../protocol/escape.js';
import { asLines } from '../protocol/messages.js';
import type { AsyncCommand, Command } from '../protocol/commands.js';
import { GahpClient } from './gahp-client.js';
import type { GahpRunOptions } from '../create-services.js';
import { GAHP_VERSION } from '../version.js';
import { makeDirs } from '../dirs.js';
import { replaceFileSync } from '../state-files.js';
import { checkProjectUrl, readAuthenticator } from '../settings.js';
import { oneEditApart } from '../util.js';

/** Help for the protocol's own commands (the BOINC_* ones come from their Command objects). */
export const PROTOCOL_HELP: Array<{ name: string; usage: string; summary: string }> = [
  { name: 'COMMANDS', usage: '', summary: 'List every command this GAHP supports.' },
  { name: 'VERSION', usage: '', summary: 'Print the GAHP version banner.' },
  { name: 'CONDOR_VERSION', usage: '<condor_version>', summary: "Tell the GAHP HTCondor's version; it answers with its own." },
  { name: 'RESPONSE_PREFIX', usage: '<prefix>', summary: 'Start every later output line with <prefix> (HTCondor uses GAHP:).' },
  { name: 'ASYNC_MODE_ON', usage: '', summary: 'Print R when a result is ready (on in interactive mode).' },
  { name: 'ASYNC_MODE_OFF', usage: '', summary: 'Stop printing R; results wait for RESULTS.' },
  { name: 'RESULTS', usage: '', summary: 'Deliver finished results (done for you here when R arrives).' },
  { name: 'QUIT', usage: '', summary: 'Stop the GAHP (also: quit, exit, Ctrl-D).' },
];

const REQID = /^[0-9]{1,18}$/;

export interface InteractiveOptions extends Omit<GahpRunOptions, 'input' | 'output'> {
  input?: NodeJS.ReadableStream;
  output?: NodeJS.WritableStream;
  /** Where command history is kept (secrets removed); default <stateDir>/history. */
  historyFile?: string;
}

/** Lines that carry a secret are kept in history without it. */
export function historySafe(line: string): string {
  const tokens = splitTokens(line);
  if (tokens[0]?.toUpperCase() === 'BOINC_SELECT_PROJECT' && tokens.length >= 3) {
    return joinTokens([tokens[0], tokens[1]!]) + ' ***';
  }
  return line;
}

/**
 * Decides whether the user typed a request id: if the first argument looks like one and the
 * rest parses, it is; otherwise an id is inserted. Returns the arguments after the reqid and
 * the reqid (undefined = assign one).
 */
export function splitReqId(command: AsyncCommand, args: string[]): { reqId?: string; args: string[] } {
  const first = args[0];
  if (first !== undefined && REQID.test(first) && !/^0+$/.test(first)) {
    try {
      command.parse(args.slice(1));
      return { reqId: first, args: args.slice(1) };
    } catch {
      /* fall through: maybe the number is an argument */
    }
    try {
      command.parse(args);
      return { args };
    } catch {
      return { reqId: first, args: args.slice(1) };
    }
  }
  return { args };
}

/** A result as a person reads it; `args` are the request's arguments (after the reqid). */
export function describeResult(command: string | undefined, tokens: string[], args: string[] = []): string[] {
  const label = command ?? 'request';
  // An error message keeps its line breaks (the server's text as it was): one line each.
  if (tokens[0] !== 'NULL') return asLines(`${label} failed: ${tokens.join(' ') || '(no message)'}`).split('\n');
  const rest = tokens.slice(1);
  switch (command) {
    case 'BOINC_FETCH_OUTPUT':
      if (rest.length === 3) return [`${label} ok: exit status ${rest[0]}, wall clock ${rest[1]} s, cpu ${rest[2]} s`];
      break;
    case 'BOINC_QUERY_BATCHES': {
      const lines = [`${label} ok: server time ${rest[0] ?? '?'}`];
      // The result lists the batches in the order asked, without their names: name them.
      const names = args.slice(2);
      let i = 1;
      let b = 0;
      while (i < rest.length) {
        const n = Number(rest[i++]);
        if (!Number.isFinite(n)) break;
        lines.push(`  ${names[b] ?? `batch #${b + 1} asked`}: ${n} job${n === 1 ? '' : 's'} changed`);
        b++;
        for (let k = 0; k < n && i + 1 < rest.length + 1; k++, i += 2) lines.push(`    ${rest[i]}  ${rest[i + 1]}`);
      }
      return lines;
    }
    default:
      break;
  }
  return [rest.length ? `${label} ok: ${rest.join(' ')}` : `${label} ok`];
}

/** What a typed line is handled with: the GAHP, its commands, the requests awaiting a result, the screen. */
interface PromptSession {
  client: GahpClient;
  commands: Map<string, Command>;
  /** reqid -> the command word and its arguments, to label results. */
  inFlight: Map<string, { command: string; args: string[] }>;
  print: (text: string) => void;
}

export async function runInteractive(opts: InteractiveOptions = {}): Promise<number> {
  const input = opts.input ?? process.stdin;
  const output = opts.output ?? process.stdout;
  const client = GahpClient.inProcess(opts);
  const commands = new Map<string, Command>();
  for (const c of client.commands ?? []) commands.set(c.name.toUpperCase(), c);
  const isTty = Boolean((output as NodeJS.WriteStream).isTTY);

  // In the directory the GAHP chose: the configured one, or its fallback when that cannot be
  // used (none when the state is kept in memory: the history then lasts the session).
  const historyFile = opts.historyFile ?? (client.stateDir ? path.join(client.stateDir, 'history') : undefined);
  const rl = readline.createInterface({
    input,
    output,
    terminal: isTty,
    history: loadHistory(historyFile),
    historySize: 500,
    removeHistoryDuplicates: true,
    prompt: 'gahp> ',
    completer: (line: string) => {
      const words = [...commands.keys(), ...PROTOCOL_HELP.map((p) => p.name), 'help', 'quit'];
      const hits = words.filter((w) => w.toLowerCase().startsWith(line.trim().toLowerCase()));
      return [hits.length ? hits : words, line];
    },
  });
  keepHistory(rl, historyFile);

  /** closing: the prompt is going away; busy: a typed line is being handled. */
  const state = { closing: false, busy: false };
  const print = (text: string) => {
    if (isTty) {
      readline.clearLine(output, 0);
      readline.cursorTo(output, 0);
      output.write(text + '\n');
      // While a typed line is being handled, the prompt comes back when it is done.
      if (!state.closing && !state.busy) rl.prompt(true);
    } else {
      output.write(text + '\n');
    }
  };
  const session: PromptSession = { client, commands, inFlight: new Map(), print };
  /** Set while the prompt, leaving, waits for the last results. */
  let onAllAnswered: (() => void) | undefined;
  client.onResult = (reqId, tokens) => {
    const request = session.inFlight.get(reqId);
    session.inFlight.delete(reqId);
    if (session.inFlight.size === 0) onAllAnswered?.();
    const lines = describeResult(request?.command, tokens, request?.args);
    print(lines.map((l, i) => (i === 0 ? `[${reqId}] ${l}` : l)).join('\n'));
  };
  client.onStray = (line) => print(`(unexpected line from the GAHP: ${line})`);

  // The prompt listens from the start: readline reads stdin as soon as it exists, and a
  // line (or the end of input) that came before the GAHP had answered would otherwise be
  // lost, and with it the end (`printf 'BOINC_PING\n' | boinc-gahp --interactive` waited
  // for ever). Such lines are handled in order once the GAHP is up.
  const started = (async () => {
    const banner = await client.banner;
    await client.request(['ASYNC_MODE_ON']);
    output.write(
      `${banner}\n` +
      `boinc-gahp ${GAHP_VERSION} interactive mode: the GAHP protocol HTCondor speaks, by hand.\n` +
      (opts.projectUrl && opts.authenticator ? `Project ${opts.projectUrl} is selected.\n` : 'No project selected yet: BOINC_SELECT_PROJECT <url> <authenticator> (or start with --project-url and --authenticator-file).\n') +
      'Type "help" for commands, "help <COMMAND>" for one. Request ids are optional. "quit" or Ctrl-D leaves.\n',
    );
    rl.prompt();
  })();
  // Lines piped in (a script, not a person) are all answered before the GAHP stops: their
  // results are what was asked for. A person at a terminal who leaves, leaves at once.
  const resultsAwaited = (input as NodeJS.ReadStream).isTTY
    ? () => Promise.resolve()
    : () => new Promise<void>((resolve) => (session.inFlight.size === 0 ? resolve() : (onAllAnswered = resolve)));
  return promptLoop(rl, session, state, output, started, resultsAwaited);
}

/** Reads typed lines one after the other until quit, Ctrl-D or Ctrl-C on an empty line; resolves with the GAHP's exit code. */
function promptLoop(
  rl: readline.Interface,
  session: PromptSession,
  state: { closing: boolean; busy: boolean },
  output: NodeJS.WritableStream,
  started: Promise<void>,
  resultsAwaited: () => Promise<void>,
): Promise<number> {
  let chain: Promise<boolean> = started.then(() => true);
  return new Promise<number>((resolve, reject) => {
    // A GAHP that does not come up: said by the caller, as before; nothing typed is sent.
    started.catch((err: unknown) => {
      state.closing = true;
      rl.close();
      reject(err);
    });
    const finish = async () => {
      if (state.closing) return;
      state.closing = true;
      await chain.catch(() => true);
      await resultsAwaited();
      const code = await session.client.close();
      output.write('\n');
      resolve(code ?? 0);
    };
    rl.on('line', (line) => {
      chain = chain.then(async (keepGoing) => {
        if (!keepGoing) return false;
        state.busy = true;
        try {
          const more = await handleTypedLine(session, line);
          if (!more) {
            rl.close();
            return false;
          }
        } catch (err) {
          session.print(`error: ${(err as Error).message}`);
        } finally {
          state.busy = false;
        }
        if (!state.closing) rl.prompt();
        return true;
      });
    });
    rl.on('close', () => void finish());
    // Ctrl-C clears a half-typed line; on an empty line it leaves, like Ctrl-D.
    rl.on('SIGINT', () => {
      if (rl.line.length > 0) {
        rl.write(null, { ctrl: true, name: 'u' });
      } else {
        output.write('\n');
        rl.close();
      }
    });
  });
}

/** The history kept from earlier sessions, newest first (none when there is no file yet). */
function loadHistory(historyFile: string | undefined): string[] {
  if (!historyFile) return [];
  try {
    return fs.readFileSync(historyFile, 'utf8').split('\n').filter((l) => l.length > 0).reverse().slice(0, 500);
  } catch {
    return []; // no history yet
  }
}

/** Keeps every new history line without its secret, in memory and in historyFile. */
function keepHistory(rl: readline.Interface, historyFile: string | undefined): void {
  rl.on('history', (h: string[]) => {
    // Never keep the authenticator, not even in memory.
    if (h[0] !== undefined && historySafe(h[0]) !== h[0]) h[0] = historySafe(h[0]);
    if (historyFile) {
      try {
        makeDirs(path.dirname(historyFile), 'the directory of the history file');
        // Replaced whole (state-files.ts): a crash mid-write never leaves a torn history.
        replaceFileSync(historyFile, [...h].reverse().join('\n') + '\n');
      } catch {
        /* history is a convenience */
      }
    }
  });
}

/** `help` (every command) or `help <COMMAND>` (its arguments). */
function helpText(commands: Map<string, Command>, word?: string): string {
  if (!word) {
    const rows: Array<[string, string]> = [];
    for (const c of commands.values()) rows.push([c.name, c.summary]);
    for (const p of PROTOCOL_HELP) rows.push([p.name, p.summary]);
    const w = Math.max(...rows.map((r) => r[0].length));
    return ['Commands (case does not matter; <reqid> may be left out, one is assigned):',
      ...rows.map(([n, s]) => `  ${n.padEnd(w)}  ${s}`),
      'help <COMMAND> shows its arguments.'].join('\n');
  }
  const up = word.toUpperCase();
  const c = commands.get(up);
  if (c) {
    if (c.name === 'BOINC_SELECT_PROJECT') {
      return `${c.name} ${c.usage}\n  ${c.summary}\n  Here you may write @<file> for the authenticator: it is read from the file and never shown.`;
    }
    const usage = c.kind === 'async' ? `${c.name} [<reqid>] ${c.usage.replace(/^<reqid>\s*/, '')}` : `${c.name} ${c.usage}`;
    return `${usage.trim()}\n  ${c.summary}` + (c.kind === 'async' ? '\n  Answered S at once; the result is printed when it arrives.' : '');
  }
  const p = PROTOCOL_HELP.find((x) => x.name === up);
  if (p) return `${p.name} ${p.usage}`.trim() + `\n  ${p.summary}`;
  return `no command "${word}"; type "help" for the list`;
}

/** What follows the GAHP's "unknown command" for a word typed: the command meant, when one is close. */
function unknownCommandHint(word: string, commands: Map<string, Command>): string {
  const names = [...commands.keys(), ...PROTOCOL_HELP.map((p) => p.name)];
  const meant = names.find((n) => n === `BOINC_${word}`) ?? names.find((n) => oneEditApart(word, n) || oneEditApart(`BOINC_${word}`, n));
  return meant ? ` (did you mean ${meant}? "help" lists the commands)` : ' (type "help" for the commands)';
}

/** Sends one typed line as a request and prints its reply; false when the user leaves. */
async function handleTypedLine(session: PromptSession, line: string): Promise<boolean> {
  const { client, commands, inFlight, print } = session;
  const trimmed = line.trim();
  if (trimmed === '') return true;
  const tokens = splitTokens(trimmed);
  const word = (tokens[0] ?? '').toUpperCase();
  if (word === 'HELP' || word === '?') {
    print(helpText(commands, tokens[1]));
    return true;
  }
  if (word === 'QUIT' || word === 'EXIT') return false;
  // The GAHP takes any URL (the gridmanager aborts on anything but S) and fails the next
  // command; a person is told now, in doctor's words, and nothing is selected.
  if (word === 'BOINC_SELECT_PROJECT' && tokens[1] !== undefined) checkProjectUrl(tokens[1], 'BOINC_SELECT_PROJECT');
  const command = commands.get(word);
  // Re-joined: a hand-typed double space must not become an empty argument (the server
  // reads lines exactly as the gridmanager writes them).
  let lineToSend = joinTokens(tokens);
  let reqId: string | undefined;
  if (command?.kind === 'async') {
    const split = splitReqId(command, tokens.slice(1));
    reqId = split.reqId ?? client.allocReqId();
    while (split.reqId === undefined && inFlight.has(reqId)) reqId = client.allocReqId();
    lineToSend = joinTokens([command.name, reqId, ...split.args]);
    inFlight.set(reqId, { command: command.name, args: split.args });
  }
  if (word === 'BOINC_SELECT_PROJECT' && tokens.length === 3 && tokens[2]!.startsWith('@')) {
    // Interactive convenience: `@<file>` reads the authenticator from a file, so it never
    // appears on the screen. What is sent is the ordinary protocol line.
    const auth = readAuthenticator(tokens[2]!.slice(1));
    client.addSecret(auth);
    lineToSend = joinTokens([tokens[0]!, tokens[1]!, auth]);
  } else if (word === 'BOINC_SELECT_PROJECT' && tokens[2]) {
    client.addSecret(tokens[2]);
  }
  const reply = await client.send(lineToSend);
  if (reply === 'S' && reqId !== undefined) {
    print(`S  (request ${reqId} queued)`);
  } else if (reply.startsWith('E')) {
    if (reqId !== undefined) inFlight.delete(reqId);
    const msg = splitTokens(reply).slice(1).join(' ');
    print(`E  error: ${asLines(msg) || 'refused'}` + (command || !word || PROTOCOL_HELP.some((p) => p.name === word) ? '' : unknownCommandHint(word, commands)));
  } else {
    print(client.mask(reply));
  }
  return true;
}
