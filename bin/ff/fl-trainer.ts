/** functions-framework entry for fl-trainer: `functions-framework --target=fl-trainer --source=dist/bin/ff/fl-trainer.js`. */
import factory from '../../functions/fl-trainer/index.js';
import { registerWithFramework } from './register.js';

await registerWithFramework('fl-trainer', factory);
