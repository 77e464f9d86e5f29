/** functions-framework entry for downstream-sync: `functions-framework --target=downstream-sync --source=dist/bin/ff/downstream-sync.js`. */
import factory from '../../functions/downstream-sync/index.js';
import { registerWithFramework } from './register.js';

await registerWithFramework('downstream-sync', factory);
