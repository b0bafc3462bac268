// YAML -> plain value with positions: the manifest is read by the loader the
// keys file shares (runtime/config/yaml-source.ts).
export { loadYaml as loadManifest, type LoadedYaml as LoadedManifest, type Position, type Problem, type YamlPath, type Document } from '../runtime/config/yaml-source.ts';
