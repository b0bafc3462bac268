// `npm run gen:keys`: writes what generator/keys-schema.ts makes from
// schema/keys.schema.json (the field table and types, the validator, the
// reference). `--check` only says whether the committed files are current.
import { keysArtefacts } from '../generator/keys-schema.ts';
import { writeArtefacts } from './write-artefacts.ts';

writeArtefacts(keysArtefacts(), 'gen:keys');
