/** functions-framework entry for joiner: `functions-framework --target=joiner --source=dist/bin/ff/joiner.js`. */
import factory from '../../functions/joiner/index.js';
import { registerWithFramework } from './register.js';

await registerWithFramework('joiner', factory);
