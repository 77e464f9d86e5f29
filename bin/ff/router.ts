/** functions-framework entry for router: `functions-framework --target=router --source=dist/bin/ff/router.js`. */
import factory from '../../functions/router/index.js';
import { registerWithFramework } from './register.js';

await registerWithFramework('router', factory);
