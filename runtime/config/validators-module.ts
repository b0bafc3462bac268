// What `@gateway/validators` is to the type checker (tsconfig paths): the
// bundle replaces it with the module generator/validators.ts emits for the
// manifest, of the same shape.
import { NO_VALIDATORS, type ValidatorTables } from './validators.ts';

const tables: ValidatorTables = NO_VALIDATORS;
export default tables;
