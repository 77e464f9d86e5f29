/** functions-framework entry for fl-aggregator: `functions-framework --target=fl-aggregator --source=dist/bin/ff/fl-aggregator.js`. */
import factory from '../../functions/fl-aggregator/index.js';
import { registerWithFramework } from './register.js';

await registerWithFramework('fl-aggregator', factory);
