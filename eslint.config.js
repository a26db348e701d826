// ESLint with typescript-eslint's type-checked rules (issue 13): the checks the compiler
// does not make (floating promises, throwing non-errors, unsafe `any`, non-exhaustive
// switches, ...). `npm run lint`; run by .ci/run. A rule switched off or tuned below says why;
// a finding silenced in the code says why on its line.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // An `async` function with no `await` is deliberate here: whatever it throws becomes
      // a rejection, handled like every other failure of the promise it returns.
      '@typescript-eslint/require-await': 'off',
      // A switch over a union must name every member, unless it has a `default` (then the
      // rest is handled on purpose).
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      '@typescript-eslint/only-throw-error': 'error',
      // Passing on what was caught (unknown) is fine; making up a non-Error reason is not.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingAny: true, allowThrowingUnknown: true }],
      'prefer-const': 'error',
    },
  },
  // Front ends import only downward (docs/architecture.md, "Layers"): the two `batch boinc`
  // front ends share gahp/batch-boinc/, below both, and neither imports the other, nor the
  // scripts' side the CLI; the core imports no front end. (Dynamic import() is not an
  // import declaration, hence the syntax rule beside each.)
  ...[
    { dir: 'gahp/blahp', banned: ['blah', 'cli'] },
    { dir: 'gahp/blah', banned: ['blahp'] },
    { dir: 'gahp/batch-boinc', banned: ['blah', 'blahp', 'cli'] },
  ].map(({ dir, banned }) => {
    const regex = `(^|/)(${banned.join('|')})/`;
    const message = `${dir}/ imports only downward: not from ${banned.map((b) => `gahp/${b}/`).join(' or ')} (what both batch boinc routes use belongs in gahp/batch-boinc/)`;
    return {
      files: [`${dir}/**/*.ts`],
      rules: {
        'no-restricted-imports': ['error', { patterns: [{ regex, message }] }],
        'no-restricted-syntax': ['error', { selector: `ImportExpression[source.value=/${regex.replaceAll('/', '\\x2F')}/]`, message }],
      },
    };
  }),
  {
    // Plain JavaScript (this file, jest's config and reporter, bin/ launchers, scripts):
    // outside the TypeScript project, so no type information.
    // (bin/ files are named one by one: a pattern ending in `*` does not select extensionless files.)
    files: ['**/*.js', '**/*.cjs', '**/*.mjs', 'bin/boinc-gahp', 'bin/boinc-test-server'],
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: {
      globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', module: 'writable', require: 'readonly', URL: 'readonly', setTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly' },
    },
  },
);
