/** Tests are TypeScript run through ts-jest as ESM; product code under test that runs as a
 * child process is the compiled dist/ build (`npm test` builds first). */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true, isolatedModules: true }] },
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  testTimeout: 60000,
  // A test that fails half-way can leave a child process or a server behind it; jest
  // would then wait for it after the last test, and CI until its time limit (it once did,
  // for 90 minutes, after a 60 s failure). The run's result is printed either way.
  forceExit: true,
  reporters: ['default', '<rootDir>/test/support/summary-reporter.cjs'],
};
