// `npm run gen:types`: writes what generator/chain-types.ts makes from
// schema/gateway.schema.json (runtime/chain-types.gen.ts, a chain's types per
// interface kind). `--check` only says whether the committed file is current.
import { chainTypesArtefacts } from '../generator/chain-types.ts';
import { writeArtefacts } from './write-artefacts.ts';

writeArtefacts(chainTypesArtefacts(), 'gen:types');
