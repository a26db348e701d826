/** The GAHP's identity, as printed in the banner, VERSION and CONDOR_VERSION. */
import { escapeToken } from './protocol/escape.js';

export const GAHP_VERSION = '1.0.0';
export const GAHP_RELEASE_DATE = 'Dec 02 2026';
export const GAHP_DESCRIPTION = 'boinc-gahp';

export function gahpBanner(): string {
  return `$GahpVersion: ${GAHP_VERSION} ${GAHP_RELEASE_DATE} ${escapeToken(GAHP_DESCRIPTION)} $`;
}
