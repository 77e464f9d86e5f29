/** `npm run crds`: writes knative/crds/*.yaml from shared/crds/schemas.ts. */
import { writeFileSync } from 'node:fs';
import { renderCustomResourceDefinitions } from '../shared/crds/generate.js';

const dir = new URL('../../knative/crds/', import.meta.url);
for (const [file, text] of Object.entries(renderCustomResourceDefinitions())) {
  writeFileSync(new URL(file, dir), text);
  process.stdout.write(`wrote knative/crds/${file}\n`);
}
