// Types for bench/targets.mjs (a plain script, so that `npm run bench` needs no build step).
export interface Target {
  scenario: string;
  peer: string;
  figure: 'rps' | 'p99';
  atLeast?: number;
  atMost?: number;
}
export interface TargetResult extends Target {
  rounds: number;
  median: number | null;
  min: number | null;
  max: number | null;
  met: boolean | null;
}
export interface RssVerdict {
  samples: number;
  middle: number | null;
  last: number | null;
  max: number | null;
  flat: boolean | null;
}
export interface RatioFigure {
  median: number;
  min: number;
  max: number;
  rounds: number;
}
export interface PeerRatios {
  peer: string;
  scenarios: Array<{ scenario: string; rps: RatioFigure | null; p99: RatioFigure | null }>;
}
export type Row = Record<string, string>;
export const TARGETS: Target[];
export function parseResults(text: string): Row[];
export function median(xs: number[]): number;
export function pairedRatios(runs: Row[][], gateway: string, peer: string, scenario: string, figure: 'rps' | 'p99'): number[];
export function checkTargets(runs: Row[][], gateway?: string): TargetResult[];
export function formatTargets(results: TargetResult[], gateway?: string): string;
export function peerRatios(runs: Row[][], gateway?: string): PeerRatios[];
export function formatPeerRatios(table: PeerRatios[], gateway?: string): string;
export function rssVerdict(samplesMiB: number[]): RssVerdict;
export function formatRss(byScenario: Array<[string, RssVerdict]>): string;
