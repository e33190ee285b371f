package io.kvrouter.route;

import io.kvrouter.event.Worker;
import java.util.concurrent.ConcurrentHashMap;
import org.jspecify.annotations.Nullable;

/**
 * How fast each worker rank's cache is evicting: an exponentially decaying count of the blocks its
 * Removed events named, with a time constant of one window.
 *
 * <pre>
 * Implementation notes
 *
 * value(t) = Σ blocks_i · exp(−(t − t_i) / window) over the evictions i: the decayed sum, about
 * the blocks evicted over the last window at a steady rate. An event stamped earlier than the
 * meter's last one (clocks of several threads) is added as if stamped with that last time, and a
 * read at a time before the last add (at, volatile) gets the count at that add: never the sum
 * extrapolated backwards.
 *
 * Scaled counts: every meter keeps its sum scaled to one epoch E shared by all meters, S =
 * Σ blocks_i · exp((t_i − E) / window), so value(t) = S · exp(−(t − E) / window). The factor is
 * the same for every rank: a decision computes it once (decay) and reads each rank's count as one
 * multiply, instead of an exp per rank. An eviction costs one exp. S grows as exp((t − E) /
 * window), so once t − E passes REBASE_WINDOWS windows (50: S stays below 10^22 × blocks) the
 * first reader or writer to see it opens a new generation with the epoch at its time, under this
 * object's monitor: current (volatile) is replaced by an immutable Epoch holding the generation's
 * number, its epoch and the one before, so a reader that read one Epoch uses its number and its
 * epoch together, however many generations open meanwhile (a shared array of two epoch slots,
 * indexed by gen & 1, let a reader stalled across two rebases apply a later epoch to an earlier
 * count: a count of e^1000, Infinity, in EvictionPressureTest's race). A meter's S belongs to the
 * generation in its gen field; one of the generation before is converted (multiplied by
 * exp((E_old − E_new) / window)) under the meter's monitor by the next writer or reader that meets
 * it; one older than that is taken as 0 (its last eviction is more than 50 windows old: e^-50 of it
 * is left).
 *
 * Meters: one per rank that ever evicted or is registered, in a ConcurrentHashMap (made on first
 * use: the only allocation). KvRouter's slots hold their rank's meter, so a decision reads it
 * with no lookup. Writers: KvRouter.applyEvent, from any ingestion thread, without the router's
 * lock, and the approximate model's evictions, under it; each add takes only its meter's monitor
 * (and, to open a generation, this object's monitor inside it: nothing takes them the other way).
 * Readers: KvRouter.decide, under the router's lock, without a monitor: it reads the Epoch once
 * (epoch(now)) and each meter's scaled, gen and at (volatile); a same-generation add writes at, then
 * scaled; the reader reads at before and after scaled and takes the sum only when at did not move
 * (else adds several windows apart could pair an old sum with a late at: an under-count, seen as
 * "count 26" in EvictionPressureTest's race under load), and a conversion writes gen = -1, then scaled, then
 * gen, so a reader that sees its Epoch's gen before and after reading scaled read a sum of that
 * generation, scaled by that Epoch's own epoch; otherwise it takes the meter's monitor and reads
 * the current Epoch there. A Cleared event resets a meter to 0 and keeps it (a slot may hold it).
 *
 * evicting (volatile) is set by the first add, before it writes a count, and never cleared:
 * until then every meter's count is 0, and a decision that reads it false (anyEvicted) takes
 * every rank's count as 0 without touching the meters (a fleet that has not evicted yet, such as
 * a fresh one, pays no cache miss per rank for the pressure term).
 * </pre>
 */
final class EvictionPressure {
  /** Windows after the epoch at which a new generation starts. */
  static final double REBASE_WINDOWS = 50;

  private final ConcurrentHashMap<Worker, Meter> meters = new ConcurrentHashMap<>();
  private final double windowNanos;
  private final long rebaseNanos;
  private volatile Epoch current; // replaced (never changed) under this object's monitor
  // set (once, for good) by the first add, before its count is written: while false, every
  // meter's count is 0 and a decision reads none of them
  private volatile boolean evicting;

  /** One generation: its number, its epoch, and the epoch of the generation before it. */
  static final class Epoch {
    final int gen;
    final long at;
    final long before;

    private Epoch(int gen, long at, long before) {
      this.gen = gen;
      this.at = at;
      this.before = before;
    }
  }

  EvictionPressure(long windowNanos) {
    this(windowNanos, 0);
  }

  /**
   * A pressure whose first epoch is {@code startNanos}: the clock's time now (a monotonic clock;
   * epochs only move forward).
   */
  EvictionPressure(long windowNanos, long startNanos) {
    if (windowNanos <= 0) {
      throw new IllegalArgumentException("the pressure window must be > 0 ns, got " + windowNanos);
    }
    this.windowNanos = windowNanos;
    this.rebaseNanos = (long) Math.min(Long.MAX_VALUE / 4.0, REBASE_WINDOWS * windowNanos);
    this.current = new Epoch(0, startNanos, startNanos);
  }

  /** The meter of {@code worker}, made if needed (a slot keeps it). */
  Meter meter(Worker worker) {
    Meter m = meters.get(worker);
    return m != null ? m : meters.computeIfAbsent(worker, w -> new Meter(current.gen));
  }

  /** Records that {@code worker} evicted {@code blocks} blocks at {@code now}. */
  void evicted(Worker worker, int blocks, long now) {
    final Meter m = meter(worker);
    synchronized (m) {
      final Epoch e = epoch(now);
      if (m.gen != e.gen) convert(m, e);
      final long t = !m.added || now - m.at > 0 ? now : m.at; // earlier than the last: as it
      if (!evicting) evicting = true; // before the count (see anyEvicted)
      m.at = t;
      m.added = true;
      m.scaled = m.scaled + blocks * Math.exp((t - e.at) / windowNanos);
    }
  }

  /**
   * Whether any rank ever evicted: while false, {@link #read} would answer 0 for every meter, so a
   * decision need not read them (a decision that reads false while an add is under way is the one
   * it would have been just before that add, as with a meter read before it).
   */
  boolean anyEvicted() {
    return evicting;
  }

  /** The current generation at {@code now}, opening a new one when its epoch is too far. */
  Epoch epoch(long now) {
    final Epoch e = current;
    return now - e.at > rebaseNanos ? rebase(now) : e;
  }

  private synchronized Epoch rebase(long now) {
    Epoch e = current;
    if (now - e.at > rebaseNanos) { // only forward: epochs 50 windows apart at least
      current = e = new Epoch(e.gen + 1, now, e.at);
    }
    return e;
  }

  /** The factor that turns scaled counts of generation {@code e} into counts at {@code now}. */
  double decay(Epoch e, long now) {
    return Math.exp(-(now - e.at) / windowNanos);
  }

  /** Under m's monitor: rescales m to generation e (at or after its own). */
  private void convert(Meter m, Epoch e) {
    final int from = m.gen;
    final double s = m.scaled;
    m.gen = -1;
    m.scaled = from == e.gen - 1 ? s * Math.exp((e.before - e.at) / windowNanos) : 0;
    m.gen = e.gen;
  }

  /**
   * The decayed count of meter {@code m} ({@code null}: none) at {@code now}, given the current
   * generation {@code g} and its {@link #decay} there: a multiply, without a monitor when the meter
   * is of that generation.
   */
  double read(@Nullable Meter m, Epoch e, double decay, long now) {
    if (m == null) return 0;
    final int g1 = m.gen;
    final long at = m.at; // an add writes at, then scaled: at read around scaled, unchanged,
    final double s = m.scaled; // means s lacks at most the add at `at` (a conversion: see gen)
    if (s == 0) return 0; // never added, or reset
    if (g1 == e.gen && m.at == at && m.gen == e.gen) {
      // read before the meter's last add (another thread's clock): the count at that add
      return now - at >= 0 ? s * decay : s * decay(e, at);
    }
    synchronized (m) {
      // the current generation: at or past e (a writer may have opened one meanwhile), and at or
      // past the meter's (whose generation was current when it was converted)
      final Epoch c = current;
      if (m.gen < c.gen) convert(m, c);
      if (m.scaled == 0) return 0;
      final long t = now - m.at >= 0 ? now : m.at;
      return c == e && t == now ? m.scaled * decay : m.scaled * decay(c, t);
    }
  }

  /** The decayed count of blocks {@code worker} evicted, at {@code now}; 0 if it never did. */
  double of(Worker worker, long now) {
    final Epoch e = epoch(now);
    return read(meters.get(worker), e, decay(e, now), now);
  }

  /** Sets {@code worker}'s count to 0 (its cache was emptied); a slot keeps its meter. */
  void reset(Worker worker) {
    final Meter m = meters.get(worker);
    if (m == null) return;
    synchronized (m) {
      m.scaled = 0;
    }
  }

  /** Forgets {@code worker} (removed from the fleet; its slot goes with it). */
  void forget(Worker worker) {
    meters.remove(worker);
  }

  /** One rank's scaled count. Times are nanoTime-style: compared by their difference. */
  static final class Meter {
    private volatile double scaled;
    private volatile int gen; // the generation scaled belongs to; -1 while being converted
    private volatile long at; // written under the monitor: the latest time added (0 before)
    private boolean added;

    Meter(int gen) {
      this.gen = gen;
    }
  }
}
