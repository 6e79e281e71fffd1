// npm run lint: ESLint with typescript-eslint's type-checked recommended rules over src, test and
// bench, then dependency-cruiser for the layers (.dependency-cruiser.cjs). .ci/run runs it first.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.test-results/**', 'data/**', 'eslint.config.mjs', '.dependency-cruiser.cjs'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // `_`-prefixed parameters and bindings are deliberately unused (a handler's fixed signature).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_' }],
    },
  },
  {
    // Plain Node scripts (scripts/*.mjs) are outside tsconfig, so they carry no types to check:
    // the rules that need type information are off for them (typescript-eslint's documented way).
    files: ['**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
  },
  { files: ['**/*.mjs'], languageOptions: { globals: { process: 'readonly', console: 'readonly' } } },
  {
    // Tests read JSON answers (`res.json()` is `any`) and assert on them field by field: typing every
    // answer would restate the schemas the server already enforces, so the no-unsafe-* family, which
    // only tracks `any` flowing on, is off here. Everything else applies to tests as to src.
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      // Test doubles and predicates stand in for promise-returning contracts (a JobHandler, the
      // check waitFor/eventually polls, a fake fetch) and are written async so that a throw in them
      // is a rejection, as it is in the real implementations; without an await inside, the rule
      // would have each rewritten to return Promise.resolve/reject by hand, or throw synchronously.
      '@typescript-eslint/require-await': 'off',
    },
  },
);
