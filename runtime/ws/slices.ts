// The open sockets cut in slices for the ping round (sockets.ts): each ping
// interval is cut in SLICES ticks and a tick pings and admits again one
// slice, so no tick does every socket (a recheck is a key lookup and a policy
// check per socket: thousands of them on one tick would stall every other
// request). A socket stays in its slice, so it is visited exactly once per
// interval: a pong has a whole interval to come, as with one round for all.

/** Ticks per ping interval. */
export const SLICES = 20;

export class Slices<T> {
  private readonly sets: Set<T>[] = Array.from({ length: SLICES }, () => new Set<T>());
  private next = 0;

  /** A new member goes to the smallest slice, so slices stay even as members come and go. */
  add(m: T): void {
    let least = this.sets[0]!;
    for (const s of this.sets) if (s.size < least.size) least = s;
    least.add(m);
  }

  delete(m: T): void {
    for (const s of this.sets) if (s.delete(m)) return;
  }

  /** The slice whose tick it is; the next call gives the next slice's. */
  turn(): ReadonlySet<T> {
    const s = this.sets[this.next]!;
    this.next = (this.next + 1) % SLICES;
    return s;
  }
}
