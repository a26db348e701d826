/**
 * The project the GAHP talks to, set by BOINC_SELECT_PROJECT (or the CLI's --project-url
 * and --authenticator-file), and the RPC client for it.
 *
 * HTCondor's gridmanager runs one GAHP for all its BOINC resources: it selects another
 * project (or account) before a command for another resource while earlier commands are
 * still pending. So a command never asks "which project is selected now?" when it runs:
 * its parser calls bind() when its line is read and the command keeps that binding to the
 * end (docs/architecture.md, "Which project a command talks to").
 */
import type { BoincRpc, BoincClientOptions } from '../boinc-rpc/types.js';

export interface ProjectSelection {
  url: string;
  authenticator: string;
}

/** A project and account as selected when a command's line was read, with its RPC client. */
export interface ProjectBinding {
  readonly project: Readonly<ProjectSelection>;
  readonly rpc: BoincRpc;
  /**
   * Names the project and the account together without holding the authenticator: the
   * key for anything kept per account (per-batch locks, the status memory of queries).
   */
  readonly accountKey: string;
}

export type RpcFactory = (opts: BoincClientOptions) => BoincRpc;

/**
 * A selection the GAHP cannot use (a URL that is no http(s) URL, an authenticator BOINC
 * cannot carry). BOINC_SELECT_PROJECT still answers `S`: the gridmanager EXCEPTs (exits,
 * with every job of every resource) on anything else, so the problem is reported instead
 * as the error result of each command issued for that resource, which holds only its jobs.
 */
export interface UnusableSelection {
  readonly unusable: string;
}

/** What a command captured when its line was read: a usable project, an unusable one, or none. */
export type CapturedSelection = ProjectBinding | UnusableSelection | undefined;

export const NO_PROJECT_MESSAGE = 'no project selected (send BOINC_SELECT_PROJECT <url> <authenticator> first)';

export class ProjectSession {
  private selected: ProjectBinding | UnusableSelection | undefined;
  /**
   * One binding (and RPC client) per project and account ever selected, closed at shutdown:
   * switching back and forth between resources reuses them (and their keep-alive
   * connections) instead of opening a client per switch. Keyed by url and authenticator;
   * the map never leaves this object.
   */
  private readonly bindings = new Map<string, ProjectBinding>();

  constructor(
    private readonly makeClient: RpcFactory,
    private readonly clientDefaults: Omit<BoincClientOptions, 'projectUrl' | 'authenticator'> = {},
  ) {}

  select(selection: ProjectSelection): void {
    this.selected = this.binding(selection);
  }

  /** The binding (and RPC client) of a project and account, made once; selects nothing. */
  binding(selection: ProjectSelection): ProjectBinding {
    const key = `${selection.url}\n${selection.authenticator}`;
    let binding = this.bindings.get(key);
    if (!binding) {
      const project = Object.freeze({ url: selection.url, authenticator: selection.authenticator });
      binding = Object.freeze({
        project,
        rpc: this.makeClient({ ...this.clientDefaults, projectUrl: project.url, authenticator: project.authenticator }),
        accountKey: `${project.url}\n#${this.bindings.size + 1}`,
      });
      this.bindings.set(key, binding);
    }
    return binding;
  }

  /** Selects a project that cannot be used: commands issued until the next selection fail with `reason`. */
  selectUnusable(reason: string): void {
    this.selected = Object.freeze({ unusable: reason });
  }

  get current(): ProjectSelection | undefined {
    return this.selected && 'project' in this.selected ? this.selected.project : undefined;
  }

  /**
   * The project and account selected now (undefined: none yet). Called by the parsers of
   * the BOINC_* commands, synchronously when their line is read.
   */
  bind(): CapturedSelection {
    return this.selected;
  }

  close(): void {
    for (const b of this.bindings.values()) b.rpc.close();
    this.bindings.clear();
    this.selected = undefined;
  }
}

/** The binding a command captured; a command read before any project was selected fails here. */
export function boundProject(binding: CapturedSelection): ProjectBinding {
  if (!binding) throw new Error(NO_PROJECT_MESSAGE);
  if ('unusable' in binding) throw new Error(binding.unusable);
  return binding;
}
