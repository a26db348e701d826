/**
 * One BLAHP script call's connection to the GAHP core: the same services (project session,
 * RPC client, ledger, log) and BOINC_* command handlers the GAHP builds, used in-process
 * without the line protocol. Built only when a call needs the server (most status calls
 * are answered from the shared snapshot and never build it).
 */
import type { BoundRequest, GahpServices } from '../services.js';
import type { ProjectBinding } from '../session.js';
import type { HandlerContext } from '../protocol/commands.js';
import type { Logger } from '../log.js';
import { authenticatorOf, loggerOf, type BlahpConfig } from './config.js';

export interface BlahpContext {
  cfg: BlahpConfig;
  log: Logger;
  /** The GAHP's services (loads the RPC stack on first use). */
  services(): Promise<GahpServices>;
  /** The configured project's binding (project, account, RPC client), as a command's parser captures it. */
  binding(): Promise<ProjectBinding>;
  /** A command request bound to the configured project. */
  bound<Req>(request: Req): Promise<BoundRequest<Req>>;
  /** A handler context for one command; its signal fires after timeoutMs (if given). */
  handler(reqId: string, timeoutMs?: number): HandlerContext;
  close(): Promise<void>;
}

export function openContext(cfg: BlahpConfig, log = loggerOf(cfg)): BlahpContext {
  let services: GahpServices | undefined;
  const shutdown = new AbortController();
  return {
    cfg,
    log,
    async services() {
      if (!services) {
        const { createServices } = await import('../create-services.js');
        services = createServices({
          stateDir: cfg.stateDir,
          log,
          projectUrl: cfg.projectUrl,
          authenticator: authenticatorOf(cfg),
          rpcTimeoutMs: cfg.rpcTimeoutMs,
          leaseSeconds: cfg.leaseSeconds,
          keepFiles: cfg.keepFiles,
        });
      }
      return services;
    },
    async binding() {
      const b = (await this.services()).session.bind();
      if (!b) throw new Error('no BOINC project selected');
      if ('unusable' in b) throw new Error(b.unusable);
      return b;
    },
    async bound(request) {
      return { request, binding: await this.binding() };
    },
    handler(reqId, timeoutMs) {
      const signal = timeoutMs === undefined ? shutdown.signal : AbortSignal.any([shutdown.signal, AbortSignal.timeout(timeoutMs)]);
      return { signal, reqId, log };
    },
    async close() {
      shutdown.abort();
      if (services) {
        services.session.close();
        await services.ledger.close().catch(() => undefined);
      }
      await log.flush().catch(() => undefined);
    },
  };
}
