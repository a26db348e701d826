/**
 * BOINC_SUBMIT figures (issue 4): time and peak RSS of the GAHP for one batch of N jobs over
 * M distinct files of S bytes, on loopback against the bundled test server (own process):
 *  - cold:        fresh state directory (empty hash cache), fresh server (every file uploaded);
 *  - warm-cache:  a NEW GAHP process on the same state directory (hash cache from the cold
 *                 run), fresh server: no hashing, every file uploaded again;
 *  - warm-all:    the same GAHP again, same server, new batch: no hashing, no upload.
 *
 * Run: npm run build && node dist/test/bench/submit-figures.js [njobs nfiles fileKiB]
 * (default 2000 500 1024). Prints one JSON object. Reusable: `submitFigures(sizes)`.
 */
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { GahpDriver } from './lib/driver.js';
import { RssSampler } from './lib/proc.js';
import { BenchServer } from './lib/server.js';
import { benchTempDir, cleanupAll, removeTempDir } from './lib/tmp.js';
import { readThrough, writeMany } from './lib/files.js';
import { batchName, jobsOver, submitLine, timedSubmit } from './figures/submit.js';

export interface SubmitFigureSizes {
  njobs: number;
  nfiles: number;
  fileBytes: number;
}

export interface SubmitFigureRun {
  seconds: number;
  peak_rss_mb: number;
  /** RPCs the server received during the submit, by name. */
  rpcs: Record<string, number>;
}

export interface SubmitFigures {
  sizes: SubmitFigureSizes;
  cold: SubmitFigureRun;
  warm_cache: SubmitFigureRun;
  warm_all: SubmitFigureRun;
}

async function measure(gahp: GahpDriver, server: BenchServer, sizes: SubmitFigureSizes, files: string[], tag: string): Promise<SubmitFigureRun> {
  await server.clearRpcLog();
  const b = batchName(tag);
  const rss = new RssSampler(gahp.pid);
  const seconds = await timedSubmit(gahp, submitLine(b, jobsOver(b, files, sizes.njobs)));
  const peak_rss_mb = Math.round(rss.stop() * 10) / 10;
  const s = await server.summary();
  return { seconds: Math.round(seconds * 1000) / 1000, peak_rss_mb, rpcs: s.rpcs };
}

async function startGahp(server: BenchServer, stateDir: string): Promise<GahpDriver> {
  const gahp = await GahpDriver.start({ stateDir });
  await gahp.startup();
  await gahp.selectProject(server.url, server.authenticator);
  return gahp;
}

export async function submitFigures(sizes: SubmitFigureSizes): Promise<SubmitFigures> {
  const inputs = benchTempDir('submit-fig-in');
  const stateDir = benchTempDir('submit-fig-state');
  try {
    const files = writeMany(inputs, sizes.nfiles, sizes.fileBytes, 9000);
    await readThrough(files);

    let server = await BenchServer.start();
    let gahp = await startGahp(server, stateDir);
    const cold = await measure(gahp, server, sizes, files, 'cold');
    await gahp.close();
    await server.close();

    server = await BenchServer.start();
    gahp = await startGahp(server, stateDir);
    try {
      const warm_cache = await measure(gahp, server, sizes, files, 'wcache');
      const warm_all = await measure(gahp, server, sizes, files, 'wall');
      return { sizes, cold, warm_cache, warm_all };
    } finally {
      await gahp.close();
      await server.close();
    }
  } finally {
    removeTempDir(inputs);
    removeTempDir(stateDir);
  }
}

if (import.meta.url === pathToFileURL(path.resolve(process.argv[1] ?? '')).href) {
  const [nj, nf, kib] = process.argv.slice(2).map(Number);
  const sizes = { njobs: nj || 2000, nfiles: nf || 500, fileBytes: (kib || 1024) * 1024 };
  submitFigures(sizes).then(
    (r) => {
      process.stdout.write(JSON.stringify(r, null, 2) + '\n');
      cleanupAll();
    },
    (err) => {
      process.stderr.write(`submit-figures: ${(err as Error).stack ?? err}\n`);
      cleanupAll();
      process.exitCode = 1;
    },
  );
}
