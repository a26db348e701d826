/**
 * The site's project for `batch boinc` (docs/blah-route.md, "Configuration"): the project
 * URL and the authenticator file that HTCondor's configuration (or the GAHP's environment)
 * names. The gridmanager starts the GAHP once per job owner and keeps it for days, so a
 * file the GAHP cannot read at start (an administrator still setting up its group, as
 * README step 2 does) must not make it exit, nor leave it broken once fixed: the GAHP
 * starts, every BLAH command says what is wrong with the file (the ping reply becomes the
 * resource's unavailable reason, a submit's the job's hold reason), and the file is read
 * again while it cannot be used, at most every REREAD_MS, so the gridmanager's next
 * resource probe after the fix finds the project usable, with no restart.
 */
import type { Logger } from './log.js';
import type { ProjectBinding, ProjectSession } from './session.js';
import { readAuthenticator } from './settings.js';
import { errorMessage } from './util.js';

/** When the gridmanager asks again (condor_gridmanager's BaseResource::Ping). */
const PING_WHILE_DOWN = 'HTCondor pings a batch boinc that is down every GRIDMANAGER_RESOURCE_PROBE_INTERVAL, 300 s by default';

/** Reads of an unusable file at most this often (every BLAH command may ask). */
export const AUTHENTICATOR_REREAD_MS = 2000;

export interface SiteProjectSettings {
  /** The project's URL, already checked. */
  url: string;
  authenticatorFile: string;
  /** Where the file was named, for the messages (e.g. BOINC_GAHP_AUTHENTICATOR_FILE in HTCondor's configuration). */
  setting: string;
}

export class SiteProject {
  private usable: ProjectBinding | undefined;
  private problem = '';
  private readAt = 0;

  constructor(
    private readonly settings: SiteProjectSettings,
    private readonly session: ProjectSession,
    private readonly log: Logger,
  ) {
    this.read();
  }

  /** Why the project cannot be used now ('' when it can). */
  get unusableReason(): string {
    return this.problem;
  }

  /**
   * The project's binding; while the authenticator file cannot be used, it is read again
   * (at most every AUTHENTICATOR_REREAD_MS), and an Error says what is wrong with it.
   */
  bind(): ProjectBinding {
    if (!this.usable && Date.now() - this.readAt >= AUTHENTICATOR_REREAD_MS) this.read();
    if (this.usable) return this.usable;
    throw new Error(this.problem);
  }

  private read(): void {
    this.readAt = Date.now();
    const { url, authenticatorFile, setting } = this.settings;
    try {
      const authenticator = readAuthenticator(authenticatorFile);
      this.log.addSecret(authenticator);
      this.usable = this.session.binding({ url, authenticator });
      if (this.problem) this.log.info(`batch boinc: the authenticator file ${authenticatorFile} can be used now: project ${url} is usable`);
      this.problem = '';
    } catch (err) {
      // The ping reply is the resource's unavailable reason; it says when the jobs will go:
      // HTCondor pings a resource that is down no sooner (docs/htcondor-check.md).
      const problem = `batch boinc cannot use project ${url}: ${errorMessage(err)} (named by ${setting}; read again at the next ping or submit: ${PING_WHILE_DOWN})`;
      // Said once per distinct problem: the file is read again every few seconds.
      if (problem !== this.problem) this.log.warn(problem);
      this.problem = problem;
    }
  }
}
