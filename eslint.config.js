// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import layers from './layers.json' with { type: 'json' };

/**
 * The layering (layers.json, drawn in docs/architecture.md) as no-restricted-imports per folder:
 * functions/ import only shared/; shared/<domain> imports only the domains on layers below its
 * own; nothing on the serving path imports bin/, bench/, test/ or the embedded local stack
 * (local/); the trainer's packages stay with the offline domains.
 */
const serving = ['bin', 'bench', 'test', 'local', 'functions'];
const offlinePackages = layers.offlinePackages.map((name) => ({
  name,
  message: `${name} is for offline tools (layers.json "offline"): it must never reach a function`,
}));

/**
 * Within shared/aset/: what serves the aset-scheduler function (the top folder) never imports
 * the simulator (sim/) or the trainer (learn/, the only part that may import shared/training),
 * and the simulator never imports the trainer.
 */
const asetParts = [
  {
    files: ['shared/aset/*.ts'],
    regex: '^\\./(sim|learn)/|^\\.\\./training/',
    message:
      'shared/aset/ serves the aset-scheduler function: it never imports the simulator (sim/), the trainer (learn/) or shared/training',
  },
  {
    files: ['shared/aset/sim/**/*.ts'],
    regex: '^\\.\\./learn/|^\\.\\./\\.\\./training/',
    message: 'the simulator (shared/aset/sim/) never imports the trainer (learn/, shared/training)',
  },
];

/** no-restricted-imports for the files of one domain, with any further patterns of theirs. */
function domainRule(domain, level, extraPatterns) {
  const above = layers.shared
    .slice(level)
    .flat()
    .filter((other) => other !== domain);
  return {
    'no-restricted-imports': [
      'error',
      {
        paths: layers.offline.includes(domain) ? [] : offlinePackages,
        patterns: [
          ...(above.length === 0
            ? []
            : [
                {
                  regex: `^\\.\\./(${above.join('|')})/`,
                  message: `shared/${domain} is on layer ${level} of layers.json: it imports only domains on the layers below (docs/architecture.md)`,
                },
              ]),
          {
            regex: `^(\\.\\./)+(${serving.join('|')})/`,
            message:
              "shared/ is the functions' library: it never imports bin/, bench/, test/, local/ or functions/",
          },
          ...extraPatterns,
        ],
      },
    ],
  };
}

function domainBoundaries() {
  return layers.shared.flatMap((layer, level) =>
    layer.flatMap((domain) => [
      { files: [`shared/${domain}/**/*.ts`], rules: domainRule(domain, level, []) },
      // A later entry for the same rule replaces it, so each part repeats the domain's patterns.
      ...(domain === 'aset'
        ? asetParts.map(({ files, regex, message }) => ({
            files,
            rules: domainRule(domain, level, [{ regex, message }]),
          }))
        : []),
    ]),
  );
}

const functionBoundaries = {
  files: ['functions/**/*.ts'],
  rules: {
    'no-restricted-imports': [
      'error',
      {
        paths: offlinePackages,
        patterns: [
          {
            regex: '^\\.\\./\\.\\./(?!shared/)',
            message:
              'a function imports only shared/ (the wiring lives in functions/<name>/index.ts)',
          },
          {
            regex: '^\\./|^\\.\\./(?!\\.\\./)',
            message:
              'a function imports no other function, and has one file: its logic lives in shared/',
          },
        ],
      },
    ],
  },
};

// The longest closures and the most tangled functions show up in every lint run (warnings).
const sizeWarnings = {
  files: ['shared/**/*.ts', 'functions/**/*.ts', 'bin/**/*.ts', 'local/**/*.ts', 'bench/**/*.ts'],
  rules: {
    'max-lines-per-function': ['warn', { max: 80, skipBlankLines: true, skipComments: true }],
    complexity: ['warn', 15],
  },
};

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', 'out/', 'coverage/', '.test-build-*/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['*.js'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      // Handlers implement a Promise-returning interface; many have nothing to await.
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
    },
  },
  { files: ['*.js'], ...tseslint.configs.disableTypeChecked },
  ...domainBoundaries(),
  functionBoundaries,
  sizeWarnings,
);
