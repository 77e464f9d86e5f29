// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import layers from './layers.json' with { type: 'json' };

/**
 * The layering (layers.json, drawn in docs/architecture.md) as no-restricted-imports per folder:
 * functions/ import only shared/; shared/<domain> imports only the domains on layers below its
 * own; nothing on the serving path imports bin/, bench/, test/, the embedded local stack
 * (local/) or the research code (research/); the trainer's packages stay with the offline
 * domains.
 */
const serving = ['bin', 'bench', 'test', 'local', 'functions', 'research'];
const offlinePackages = layers.offlinePackages.map((name) => ({
  name,
  message: `${name} is for offline tools (layers.json "offline"): it must never reach a function`,
}));

/**
 * shared/aset/ serves the aset-scheduler function: beyond the layering (which would allow it), it
 * never imports the offline trainer's domain, shared/training (ASET's trainer is research/).
 */
const asetPatterns = [
  {
    regex: '^\\.\\./training/',
    message:
      'shared/aset/ serves the aset-scheduler function: it never imports shared/training (the trainer is research/aset/learn/)',
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
              "shared/ is the functions' library: it never imports bin/, bench/, test/, local/, functions/ or research/",
          },
          ...extraPatterns,
        ],
      },
    ],
  };
}

function domainBoundaries() {
  return layers.shared.flatMap((layer, level) =>
    layer.map((domain) => ({
      files: [`shared/${domain}/**/*.ts`],
      rules: domainRule(domain, level, domain === 'aset' ? asetPatterns : []),
    })),
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

/** What ships and the shipped benches never import the research code (research/README.md). */
const researchApart = {
  files: ['bin/**/*.ts', 'local/**/*.ts', 'bench/**/*.ts'],
  rules: {
    'no-restricted-imports': [
      'error',
      {
        patterns: [
          {
            regex: '^(\\.\\./)+research/',
            message:
              'research/ (the ASET simulator, trainer and their benches) is imported by nothing that ships, nor by bench/',
          },
        ],
      },
    ],
  },
};

/**
 * Within research/: the ASET library (research/aset/) never imports a bench, a program or a
 * test, and the simulator (sim/) never imports the trainer (learn/, nor shared/training, which
 * learn/ builds on).
 */
const researchLibrary = {
  regex: '^(\\.\\./)+(bench|bin|test)/',
  message:
    'research/aset/ is a library: it never imports bench/, bin/ or test/ (research/ or top-level)',
};
const researchParts = [
  {
    files: ['research/aset/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [researchLibrary] }] },
  },
  // A later entry for the same rule replaces it, so the simulator repeats the library's pattern.
  {
    files: ['research/aset/sim/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            researchLibrary,
            {
              regex: '^\\.\\./learn/|^(\\.\\./)+shared/training/',
              message:
                'the simulator (research/aset/sim/) never imports the trainer (research/aset/learn/, shared/training)',
            },
          ],
        },
      ],
    },
  },
];

// The longest closures and the most tangled functions show up in every lint run (warnings).
const sizeWarnings = {
  files: [
    'shared/**/*.ts',
    'functions/**/*.ts',
    'bin/**/*.ts',
    'local/**/*.ts',
    'bench/**/*.ts',
    'research/**/*.ts',
  ],
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
  researchApart,
  ...researchParts,
  sizeWarnings,
);
