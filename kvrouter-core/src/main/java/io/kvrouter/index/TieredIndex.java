package io.kvrouter.index;

import com.google.errorprone.annotations.concurrent.GuardedBy;
import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import it.unimi.dsi.fastutil.longs.Long2IntMap;
import it.unimi.dsi.fastutil.longs.Long2IntOpenHashMap;
import it.unimi.dsi.fastutil.longs.Long2LongOpenHashMap;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import it.unimi.dsi.fastutil.longs.LongArrayList;
import it.unimi.dsi.fastutil.longs.LongIterator;
import it.unimi.dsi.fastutil.longs.LongLinkedOpenHashSet;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * A {@link KvIndex} of the device tier that also tracks the copies workers keep on slower tiers
 * (host memory, disk, an external store), kind-agnostic: it keeps one cumulative index per tier,
 * all made by the same factory, and asks each for its ordinary exact score.
 *
 * <p>As a {@link KvIndex} it is the device index, unchanged: {@link #apply(RouterEvent)} is a
 * device event (except a {@code Cleared}, which drops the rank's blocks on every tier), and {@link
 * #findMatches}, {@link #dump()}, {@link #blockCount(Worker)} and {@link #stats()} are the device
 * index's. {@link #apply(Tier, RouterEvent)} applies an event of one tier, and {@link #findTiered}
 * answers for every tier at once.
 *
 * <pre>
 * Implementation notes
 *
 * Data: levels[k] is the cumulative index C_(k+1): levels[0] is the device index itself, levels[1]
 * holds device ∪ host, levels[2] device ∪ host ∪ disk, levels[3] all four tiers. A (rank, block)
 * is in levels[k] iff some tier among the first k+1 holds it (as the events told; a store a level
 * refuses because its parent is missing there is refused there, per DESIGN.md §4 rule 2).
 * levels[1..k] are made the first time an event of tier k arrives, each seeded with the dump of
 * the level below it (tier k had no event before, so the level below holds exactly what level k
 * must hold; blocks a dump leaves out, detached ones, are left out of the new level too: they
 * score nothing until a re-store, which the new level then refuses: an undercount, never an
 * overcount). published is the array readers see (a copy, replaced when a level is made).
 *
 * ranks maps each rank to its tier masks: for each sequence hash (the engine's name of a block)
 * one bit per tier that holds it, and the number of hashes per tier. Writers only (under lock),
 * except counts (AtomicIntegerArray), which /metrics reads.
 *
 * Bound (maxTierBlocks > 0): each rank keeps at most maxTierBlocks hashes per tier beyond the
 * device, and drops only leaves of its chains on that tier, so a drop never cuts a chain (what is
 * left is a prefix, and scores). chains[t] of a rank (TierChains, bounded tiers only) holds, for
 * each hash with bit t: parent, the parent named by the first of its stores that named one (the
 * event's parent or the previous block; absent while only stored at the root), whether or not that parent is on tier
 * t; children, per hash, how many hashes with bit t name it as parent (the hash itself need not
 * have bit t: a host block under a device-only block keeps that block a non-leaf should it come to
 * the host later); leaves, the hashes with bit t and no child, least recently stored first.
 * Invariant: children[x] == |{h with bit t : parent[h] == x}|, and leaves == {h with bit t :
 * children[h] == 0}. A Stored of tier t links each newly linked block to its parent (the parent
 * leaves the leaf order: it has a child now) and moves each stored leaf to the end, in chain
 * order, so the deepest stays newest. Clearing bit t of h (a Removed, a Cleared, a drop) unlinks
 * h from its parent, and a parent with bit t left childless goes to the front of the leaf order:
 * it is as cold as the leaf that just went (LRU cascades up a cold chain). After a Stored of tier
 * t the first leaves are dropped from tier t until the bound holds, exactly as a Removed of tier t
 * would drop them, and counted in evicted[t]. O(1) hash operations per event block. Only links
 * that close a cycle (events no engine sends: a hash its own ancestor) can leave no leaf; then an
 * arbitrary linked hash goes. Recency is store recency: reads take no lock and touch nothing.
 * The device tier is not bounded here (its index kind may be: serve --max-blocks).
 *
 * Applying an event of tier t: a Stored sets bit t of each block and is applied whole to every
 * level k >= t (stores are idempotent in every kind, so a block already there through another
 * tier stays as it is). A Removed clears bit t and removes the block from level k >= t only when
 * no tier among the first k+1 still holds it. A Cleared of tier t does that for every block of
 * the rank with bit t (and the device level gets the Cleared itself when t is the device).
 * A Cleared through apply(RouterEvent) (Dynamo's JSON events, unregistering a rank) clears every
 * level and forgets the rank's masks. So each level is exactly the union of its tiers, and C_1 is
 * the device index untouched: the same events, in the same order.
 *
 * Threading: until the first event of a non-device tier (active == false), every write goes
 * straight to the device index: no lock, no map, no allocation beyond the device index's own;
 * the only cost is the fastWriters gate (one increment and one decrement of an AtomicInteger).
 * Activation (under lock) sets active, then waits until fastWriters is 0, so every device write
 * that chose the direct path has landed before the masks are seeded from the device dump; a write
 * that increments after reading active false reads it again after the increment (both volatile:
 * either the writer sees active, or activation sees its increment and waits for it). From then on
 * every write takes lock (writers take turns, as the concurrent kinds' own writers do) and
 * applies to the levels in ascending order. Readers take no lock: findTiered reads published and
 * calls each level's findMatches. A reader may see an event applied to a lower level and not yet
 * to a higher one; findTiered makes the scores non-decreasing (P_k = max(P_(k-1), score of
 * level k)), so each P_k is a prefix some level held at some moment during the call: never more
 * than a tier held.
 * </pre>
 */
public final class TieredIndex extends ForwardingKvIndex implements TieredKvIndex {
  private static final int TIERS = TieredScores.TIERS;

  /** An event of one tier, as {@link #dumpTiered()} gives them. */
  public record Entry(Tier tier, RouterEvent event) {
    public Entry {
      Objects.requireNonNull(tier, "tier");
      Objects.requireNonNull(event, "event");
    }
  }

  private final Supplier<KvIndex> factory;
  private final KvIndex device;

  @GuardedBy("lock")
  private final KvIndex[] levels = new KvIndex[TIERS]; // under lock

  private volatile KvIndex @Nullable [] published; // null until active
  private final ReentrantLock lock = new ReentrantLock();
  private volatile boolean active;
  private final AtomicInteger fastWriters = new AtomicInteger();
  private final ConcurrentHashMap<Worker, RankTiers> ranks = new ConcurrentHashMap<>();
  private final int maxTierBlocks; // per rank and tier beyond the device; 0: no bound
  private final AtomicLongArray evicted = new AtomicLongArray(TIERS);

  /** The masks of one rank: writer-only, except the counts. */
  private static final class RankTiers {
    final Long2IntOpenHashMap mask = new Long2IntOpenHashMap();
    final AtomicIntegerArray counts = new AtomicIntegerArray(TIERS);
    final TierChains[] chains = new TierChains[TIERS]; // with a bound only

    TierChains chains(int t) {
      TierChains c = chains[t];
      if (c == null) chains[t] = c = new TierChains();
      return c;
    }
  }

  /** The chains of one rank on one bounded tier (see the implementation notes): writer-only. */
  private static final class TierChains {
    final Long2LongOpenHashMap parent = new Long2LongOpenHashMap();
    final Long2IntOpenHashMap children = new Long2IntOpenHashMap();
    final LongLinkedOpenHashSet leaves = new LongLinkedOpenHashSet();

    /** {@code h} (now with bit t) stored under {@code p} (when {@code linked}). */
    void stored(long h, boolean linked, long p) {
      if (linked && p != h && !parent.containsKey(h)) {
        parent.put(h, p);
        children.addTo(p, 1);
        leaves.remove(p);
      }
      if (children.get(h) == 0) leaves.addAndMoveToLast(h);
    }

    /**
     * {@code h} lost bit t; returns its parent when that parent was left childless (the caller puts
     * it first in the leaf order when it has bit t), else {@code h} itself.
     */
    long dropped(long h) {
      leaves.remove(h);
      if (!parent.containsKey(h)) return h;
      long p = parent.remove(h);
      if (children.addTo(p, -1) > 1) return h;
      children.remove(p);
      return p;
    }
  }

  private TieredIndex(KvIndex device, Supplier<KvIndex> factory, int maxTierBlocks) {
    super(device);
    this.device = device;
    this.factory = factory;
    this.maxTierBlocks = maxTierBlocks;
    this.levels[0] = device;
  }

  /**
   * A tiered index whose device index and cumulative indexes are made by {@code factory} (one call
   * now, one per cumulative index when its tier first appears).
   */
  public static TieredIndex of(Supplier<KvIndex> factory) {
    return of(factory, 0);
  }

  /**
   * Like {@link #of(Supplier)}, with each rank holding at most {@code maxTierBlocks} blocks on each
   * tier beyond the device: past it, the leaves of the rank's chains on that tier (blocks with no
   * child there) stored least recently are dropped from it, a parent left childless next, as a
   * removal of that tier would drop them, so what is left of a chain is a prefix and still scores
   * (docs/routing.md, "Blocks beyond the GPU"), counted in {@link #evictedBlocks(Tier)}. 0: no
   * bound.
   *
   * @throws IllegalArgumentException when {@code maxTierBlocks} is negative
   */
  public static TieredIndex of(Supplier<KvIndex> factory, int maxTierBlocks) {
    Objects.requireNonNull(factory, "factory");
    if (maxTierBlocks < 0) {
      throw new IllegalArgumentException(
          "maxTierBlocks must be >= 1 (or 0 for no bound), got " + maxTierBlocks);
    }
    return new TieredIndex(
        Objects.requireNonNull(factory.get(), "factory.get()"), factory, maxTierBlocks);
  }

  /**
   * Like {@link #of(Supplier)}, with the cumulative indexes up to {@code upTo} made now, so that
   * the tier masks follow every event from the first (exact even for device blocks a hole detached
   * before the first event of another tier, which lazy creation leaves out). Every device write
   * then takes the writer lock.
   */
  public static TieredIndex withTiers(Supplier<KvIndex> factory, Tier upTo) {
    TieredIndex t = of(factory);
    t.addTiers(upTo);
    return t;
  }

  /**
   * A tiered index over {@code device}, whose cumulative indexes are made by {@code factory}, which
   * must make indexes of the same kind (and thread safety) as {@code device}.
   */
  public static TieredIndex over(KvIndex device, Supplier<KvIndex> factory) {
    return new TieredIndex(
        Objects.requireNonNull(device, "device"), Objects.requireNonNull(factory, "factory"), 0);
  }

  /** The device index (C_1). */
  public KvIndex deviceIndex() {
    return device;
  }

  /** Whether an event of a tier other than the device arrived (the cumulative indexes exist). */
  public boolean hasTiers() {
    return active;
  }

  @Override
  public Tier slowestTier() {
    KvIndex[] lv = published;
    if (lv == null) return Tier.DEVICE;
    int top = TIERS - 1;
    while (lv[top] == null) top--;
    return Tier.of(top);
  }

  /**
   * Makes the cumulative indexes up to {@code upTo} now (each seeded from the one below, as when
   * its tier's first event arrives); a no-op for those that exist and for {@link Tier#DEVICE}.
   */
  @Override
  public void addTiers(Tier upTo) {
    Objects.requireNonNull(upTo, "upTo");
    if (upTo == Tier.DEVICE) return;
    lock.lock();
    try {
      ensureLevels(upTo.ordinal());
    } finally {
      lock.unlock();
    }
  }

  // ------------------------------------------------------------------ writes

  /**
   * A device event; a {@code Cleared} drops the rank's blocks on every tier (the meaning Dynamo
   * gives its JSON {@code cleared}, and what unregistering a rank needs).
   */
  @Override
  public void apply(RouterEvent event) {
    if (appliedBeforeTiers(event)) return;
    lock.lock();
    try {
      if (event.data() instanceof CacheEvent.Cleared) {
        clearAllTiers(event);
      } else {
        applyLocked(0, event);
      }
    } finally {
      lock.unlock();
    }
  }

  /**
   * The device-only path while no other tier exists: applies {@code event} to the device index
   * without the lock and returns true, or returns false once tiers are active (counted in
   * fastWriters, which activation waits to drain).
   */
  private boolean appliedBeforeTiers(RouterEvent event) {
    if (active) return false;
    fastWriters.incrementAndGet();
    try {
      if (active) return false;
      device.apply(event);
      return true;
    } finally {
      fastWriters.decrementAndGet();
    }
  }

  /**
   * An event about the copies on {@code tier}: a {@code Cleared} drops only what that tier held
   * (vLLM's {@code AllBlocksCleared} clears the device and keeps the offloaded copies).
   */
  @Override
  public void apply(Tier tier, RouterEvent event) {
    Objects.requireNonNull(tier, "tier");
    Objects.requireNonNull(event, "event");
    final int t = tier.ordinal();
    if (t == 0 && appliedBeforeTiers(event)) return;
    lock.lock();
    try {
      if (t > 0) ensureLevels(t);
      applyLocked(t, event);
    } finally {
      lock.unlock();
    }
  }

  @Override
  public void clearWorker(long workerId) {
    if (directly(() -> device.clearWorker(workerId))) return;
    lock.lock();
    try {
      for (KvIndex l : levels) if (l != null) l.clearWorker(workerId);
      ranks.keySet().removeIf(w -> w.workerId() == workerId);
    } finally {
      lock.unlock();
    }
  }

  @Override
  public void removeWorker(long workerId) {
    if (directly(() -> device.removeWorker(workerId))) return;
    lock.lock();
    try {
      for (KvIndex l : levels) if (l != null) l.removeWorker(workerId);
      ranks.keySet().removeIf(w -> w.workerId() == workerId);
    } finally {
      lock.unlock();
    }
  }

  /** Runs {@code op} on the device index alone while not active; false when active. */
  private boolean directly(Runnable op) {
    if (active) return false;
    fastWriters.incrementAndGet();
    try {
      if (active) return false;
      op.run();
      return true;
    } finally {
      fastWriters.decrementAndGet();
    }
  }

  /** Makes levels 1..t that do not exist yet (under lock). */
  @GuardedBy("lock")
  private void ensureLevels(int t) {
    if (levels[t] != null) return;
    if (!active) activate();
    for (int k = 1; k <= t; k++) {
      if (levels[k] != null) continue;
      KvIndex l = Objects.requireNonNull(factory.get(), "factory.get()");
      for (RouterEvent e : levels[k - 1].dump()) l.apply(e);
      levels[k] = l;
    }
    published = levels.clone();
  }

  /** The first non-device event: from now on every write goes through lock (under lock). */
  private void activate() {
    active = true;
    while (fastWriters.get() != 0) Thread.onSpinWait();
    for (RouterEvent e : device.dump()) {
      RankTiers r = rank(e.worker());
      if (e.data() instanceof CacheEvent.Stored s) {
        for (long h : s.blockHashes()) set(r, h, 0);
      }
    }
  }

  private RankTiers rank(Worker w) {
    RankTiers r = ranks.get(w);
    if (r == null) ranks.put(w, r = new RankTiers());
    return r;
  }

  private static void set(RankTiers r, long h, int t) {
    final int bit = 1 << t;
    int old = r.mask.get(h);
    if ((old & bit) == 0) {
      r.mask.put(h, old | bit);
      r.counts.incrementAndGet(t);
    }
  }

  @GuardedBy("lock")
  private void applyLocked(int t, RouterEvent e) {
    switch (e.data()) {
      case CacheEvent.Stored s -> {
        RankTiers r = rank(e.worker());
        long[] h = s.blockHashes();
        if (t > 0 && maxTierBlocks > 0) {
          TierChains c = r.chains(t);
          for (int i = 0; i < h.length; i++) {
            set(r, h[i], t);
            c.stored(h[i], i > 0 || s.hasParent(), i > 0 ? h[i - 1] : s.parentHash());
          }
        } else {
          for (long x : h) set(r, x, t);
        }
        for (int k = t; k < TIERS; k++) if (levels[k] != null) levels[k].apply(e);
        if (t > 0 && maxTierBlocks > 0) bound(r, t, e);
      }
      case CacheEvent.Removed rm -> {
        if (t == 0) device.apply(e);
        RankTiers r = ranks.get(e.worker());
        if (r == null) return;
        LongArrayList[] out = new LongArrayList[TIERS];
        for (long h : rm.blockHashes()) unset(r, h, t, out);
        removeFromLevels(e, out);
      }
      case CacheEvent.Cleared c -> {
        if (t == 0) device.apply(e);
        RankTiers r = ranks.get(e.worker());
        if (r == null) return;
        final int bit = 1 << t;
        LongArrayList held = new LongArrayList();
        for (Long2IntMap.Entry x : r.mask.long2IntEntrySet()) {
          if ((x.getIntValue() & bit) != 0) held.add(x.getLongKey());
        }
        LongArrayList[] out = new LongArrayList[TIERS];
        for (int i = 0, n = held.size(); i < n; i++) unset(r, held.getLong(i), t, out);
        removeFromLevels(e, out);
      }
    }
  }

  /**
   * Drops the least recently stored leaves of the rank's tier-{@code t} chains (a parent left
   * childless next) until the bound holds (under lock).
   */
  @GuardedBy("lock")
  private void bound(RankTiers r, int t, RouterEvent e) {
    if (r.counts.get(t) <= maxTierBlocks) return;
    TierChains c = r.chains(t);
    LongArrayList[] out = new LongArrayList[TIERS];
    int n = 0;
    while (r.counts.get(t) > maxTierBlocks) {
      // no leaf: only links closing a cycle (a hash its own ancestor, which no engine sends)
      long h = c.leaves.isEmpty() ? c.parent.keySet().iterator().nextLong() : c.leaves.firstLong();
      unset(r, h, t, out);
      n++;
    }
    evicted.addAndGet(t, n);
    removeFromLevels(e, out);
  }

  /**
   * Clears bit {@code t} of {@code h} and adds {@code h} to {@code out[k]} for each level {@code k
   * >= max(t, 1)} that no remaining tier among its first k+1 holds it in.
   */
  @GuardedBy("lock")
  private void unset(RankTiers r, long h, int t, LongArrayList[] out) {
    final int bit = 1 << t;
    int old = r.mask.get(h);
    if ((old & bit) == 0) return;
    int rest = old & ~bit;
    if (rest == 0) r.mask.remove(h);
    else r.mask.put(h, rest);
    r.counts.decrementAndGet(t);
    TierChains c = r.chains[t];
    if (c != null) {
      long p = c.dropped(h);
      if (p != h && (r.mask.get(p) & bit) != 0) c.leaves.addAndMoveToFirst(p);
    }
    int lowest = rest == 0 ? TIERS : Integer.numberOfTrailingZeros(rest);
    for (int k = Math.max(t, 1); k < lowest; k++) {
      if (levels[k] == null) continue;
      if (out[k] == null) out[k] = new LongArrayList();
      out[k].add(h);
    }
  }

  @GuardedBy("lock")
  private void removeFromLevels(RouterEvent e, LongArrayList[] out) {
    for (int k = 1; k < TIERS; k++) {
      if (out[k] == null || levels[k] == null) continue;
      levels[k].apply(
          new RouterEvent(e.worker(), e.eventId(), CacheEvent.removed(out[k].toLongArray())));
    }
  }

  @GuardedBy("lock")
  private void clearAllTiers(RouterEvent e) {
    for (KvIndex l : levels) if (l != null) l.apply(e);
    ranks.remove(e.worker());
  }

  // ------------------------------------------------------------------ reads

  /**
   * Every rank's cumulative scores {@code P_1..P_4} for the query (exact scores of each cumulative
   * index, made non-decreasing); never blocks behind writers.
   */
  @SuppressWarnings("NullAway") // unboxes row.get(w) for workers the loop above put in row
  public TieredScores findTiered(long[] localHashes) {
    final KvIndex[] lv = published;
    final OverlapScores d = device.findMatches(localHashes, false);
    if (lv == null) {
      final int n = d.size();
      Worker[] workers = new Worker[n];
      int[] cum = new int[n * TIERS];
      for (int i = 0; i < n; i++) {
        workers[i] = d.worker(i);
        Arrays.fill(cum, i * TIERS, i * TIERS + TIERS, d.scoreAt(i));
      }
      return new TieredScores(d, workers, cum, n);
    }
    OverlapScores[] s = new OverlapScores[TIERS];
    s[0] = d;
    for (int k = 1; k < TIERS; k++) if (lv[k] != null) s[k] = lv[k].findMatches(localHashes, false);
    Map<Worker, Integer> row = new HashMap<>();
    List<Worker> order = new ArrayList<>();
    for (OverlapScores x : s) {
      if (x == null) continue;
      for (int i = 0, n = x.size(); i < n; i++) {
        Worker w = x.worker(i);
        if (row.putIfAbsent(w, order.size()) == null) order.add(w);
      }
    }
    final int n = order.size();
    int[] raw = new int[n * TIERS];
    for (int k = 0; k < TIERS; k++) {
      if (s[k] == null) continue;
      for (int i = 0, m = s[k].size(); i < m; i++) {
        raw[row.get(s[k].worker(i)) * TIERS + k] = s[k].scoreAt(i);
      }
    }
    for (int i = 0; i < n; i++) {
      for (int k = 1; k < TIERS; k++) {
        int at = i * TIERS + k;
        raw[at] = Math.max(raw[at - 1], raw[at]); // a missing level adds nothing
      }
    }
    return new TieredScores(d, order.toArray(new Worker[0]), raw, n);
  }

  /**
   * Blocks {@code worker} holds on {@code tier}: for the device, {@link #blockCount(Worker)} (those
   * that can score); for the others, the distinct sequence hashes its events left there.
   */
  public int blockCount(Worker worker, Tier tier) {
    if (tier == Tier.DEVICE) return device.blockCount(worker);
    RankTiers r = ranks.get(worker);
    return r == null ? 0 : r.counts.get(tier.ordinal());
  }

  /**
   * Blocks dropped from {@code tier} to keep each rank within the bound of {@link #of(Supplier,
   * int)} (0 for the device, and without a bound).
   */
  public long evictedBlocks(Tier tier) {
    return evicted.get(tier.ordinal());
  }

  /**
   * The bound of {@link #of(Supplier, int)}: blocks per rank and tier beyond the device; 0: none.
   */
  public int maxTierBlocks() {
    return maxTierBlocks;
  }

  /** The sum of {@link #blockCount(Worker, Tier)} over every rank with blocks off the device. */
  public long blockCount(Tier tier) {
    if (tier == Tier.DEVICE) throw new IllegalArgumentException("device blocks: ask per rank");
    long sum = 0;
    for (RankTiers r : ranks.values()) sum += r.counts.get(tier.ordinal());
    return sum;
  }

  /**
   * Every event needed to rebuild this index's answers on every tier: replayed in order through
   * {@link #apply(Tier, RouterEvent)} into an empty tiered index of any kind, it gives equal {@link
   * #findTiered} answers (blocks that score nothing are left out, as {@link #dump()} leaves them).
   * Without tiers, the device dump. Replay into an index given {@link #addTiers} of this one's
   * {@link #slowestTier()} first, so that it has tiers even when no block is left off the device.
   * With a bound ({@link #of(Supplier, int)}), the leaves of each rank's chains on each bounded
   * tier follow once more, least recently stored first, so that a replay into an index with the
   * same bound holds the same chains and leaf order, and drops the same blocks later. What still
   * differs: a block counted on a tier but left out of the dump (it scores nothing: behind a hole
   * on every tier that holds its parent, or dropped by a bounded index kind on its own) is not in
   * the replay, so the replay holds fewer blocks on that tier and starts dropping later; and a
   * block whose every child on that tier is left out is a leaf in the replay, older than every leaf
   * of this index (so among the first to go), where this index drops it only after those children.
   */
  @Override
  public List<Entry> dumpTiered() {
    lock.lock();
    try {
      List<Entry> out = new ArrayList<>();
      if (!active) {
        for (RouterEvent e : device.dump()) out.add(new Entry(Tier.DEVICE, e));
        return out;
      }
      int top = TIERS - 1;
      while (levels[top] == null) top--;
      // with a bound: each dumped block's event, to store again below in recency order
      Map<Worker, Long2ObjectOpenHashMap<RouterEvent>> byHash =
          maxTierBlocks > 0 ? new HashMap<>() : null;
      for (RouterEvent e : levels[top].dump()) {
        if (!(e.data() instanceof CacheEvent.Stored s)) {
          out.add(new Entry(Tier.DEVICE, e));
          continue;
        }
        // one event per block (a kind may dump a run of blocks as one store), under its own tiers
        RankTiers r = ranks.get(e.worker());
        long[] h = s.blockHashes();
        for (int i = 0; i < h.length; i++) {
          long[] one = {h[i]};
          long[] local = {s.tokensHashes()[i]};
          CacheEvent block =
              i > 0
                  ? CacheEvent.stored(h[i - 1], one, local)
                  : s.hasParent()
                      ? CacheEvent.stored(s.parentHash(), one, local)
                      : CacheEvent.storedAtRoot(one, local);
          RouterEvent be = new RouterEvent(e.worker(), e.eventId(), block);
          int mask = r == null ? 0 : r.mask.get(h[i]);
          for (int t = 0; t < TIERS; t++) {
            if ((mask & (1 << t)) != 0) out.add(new Entry(Tier.of(t), be));
          }
          if (byHash != null && (mask & ~1) != 0) {
            byHash.computeIfAbsent(e.worker(), w -> new Long2ObjectOpenHashMap<>()).put(h[i], be);
          }
        }
      }
      if (byHash != null) {
        // each bounded tier's leaves once more, least recently stored first: stores of held blocks
        // change no level nor link, and leave a replay's leaf order as this index's
        for (Map.Entry<Worker, Long2ObjectOpenHashMap<RouterEvent>> w : byHash.entrySet()) {
          RankTiers r = ranks.get(w.getKey());
          for (int t = 1; t < TIERS; t++) {
            if (r == null || r.chains[t] == null) continue;
            LongIterator it = r.chains[t].leaves.iterator();
            while (it.hasNext()) {
              RouterEvent be = w.getValue().get(it.nextLong());
              if (be != null) out.add(new Entry(Tier.of(t), be));
            }
          }
        }
      }
      return out;
    } finally {
      lock.unlock();
    }
  }

  @Override
  public void flush() {
    KvIndex[] lv = published;
    if (lv == null) {
      device.flush();
      return;
    }
    for (KvIndex l : lv) if (l != null) l.flush();
  }

  /** Closes every cumulative index and the device index. */
  @Override
  public void close() {
    lock.lock();
    try {
      for (int k = TIERS - 1; k >= 1; k--) if (levels[k] != null) levels[k].close();
    } finally {
      lock.unlock();
    }
    device.close();
  }
}
