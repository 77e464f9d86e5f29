/** functions-framework entry for reconcile-tick: `functions-framework --target=reconcile-tick --source=dist/bin/ff/reconcile-tick.js`. */
import factory from '../../functions/reconcile-tick/index.js';
import { registerWithFramework } from './register.js';

await registerWithFramework('reconcile-tick', factory);
