/** Tests are TypeScript run through ts-jest as ESM; product code under test that runs as a
 * child process is the compiled dist/ build (`npm test` builds first). */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true, isolatedModules: true }] },
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  testTimeout: 60000,
  reporters: ['default', '<rootDir>/test/support/summary-reporter.cjs'],
};
