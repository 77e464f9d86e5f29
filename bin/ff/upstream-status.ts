/** functions-framework entry for upstream-status: `functions-framework --target=upstream-status --source=dist/bin/ff/upstream-status.js`. */
import factory from '../../functions/upstream-status/index.js';
import { registerWithFramework } from './register.js';

await registerWithFramework('upstream-status', factory);
