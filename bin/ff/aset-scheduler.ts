/** functions-framework entry for aset-scheduler: `functions-framework --target=aset-scheduler --source=dist/bin/ff/aset-scheduler.js`. */
import factory from '../../functions/aset-scheduler/index.js';
import { registerWithFramework } from './register.js';

await registerWithFramework('aset-scheduler', factory);
