package io.kvrouter.mockengine;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import it.unimi.dsi.fastutil.longs.Long2LongOpenHashMap;
import it.unimi.dsi.fastutil.longs.LongIterator;
import it.unimi.dsi.fastutil.longs.LongOpenHashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.function.Consumer;
import java.util.function.LongConsumer;

/**
 * A simulated rank's host-memory KV tier (CPU offloading): blocks the device evicts are copied
 * here, kept in LRU order up to a capacity, and a prompt's blocks that follow its device prefix and
 * are here are loaded at a transfer cost instead of being recomputed. Publishes its stores and
 * evictions as host-tier events, as vLLM's OffloadingConnector does with {@code medium} CPU.
 *
 * <pre>
 * Implementation notes
 *
 * Runs on the EventLoop's thread. tap() sits between the rank's PrefixCache and the fleet's
 * event sink: from the device Stored events it learns each block's parent and local hash
 * (parentOf, localOf; roots for blocks stored at the root) and which blocks are on the device
 * (onDevice); a device Removed moves each named block here before the Removed goes on, so the
 * host Stored comes first (vLLM's write-through order: the CPU copy exists before the GPU copy
 * goes) and its parent, still on the device or already here, is known to a tiered index. lru is
 * an access-ordered LinkedHashMap of the blocks here; past capacity its eldest block leaves
 * (a host Removed). A block's parent and local hash are forgotten once it is neither on the
 * device nor here (a host eviction of a block not on the device, or a device Cleared for the
 * blocks not here). hits() touches what it finds. The copy stays when a host block is loaded
 * back (write-through: the host keeps it).
 *
 * Model (docs/SIMULATION.md, "A host tier"): a hit costs transferNanos per block on the rank's
 * prefill lane, synchronously, instead of the block's recompute (BLIS's reload model; Dynamo's
 * mocker parks the request for the transfer, which is the same on a FIFO lane).
 * </pre>
 */
public final class HostTier {
  private static final long NO_PARENT = 0L;

  private final Worker worker;
  private final int capacity;
  private final long transferNanos;
  private final Consumer<RouterEvent> out;
  private final LongConsumer forgotten;
  private final Long2LongOpenHashMap parentOf = new Long2LongOpenHashMap();
  private final Long2LongOpenHashMap localOf = new Long2LongOpenHashMap();
  private final LongOpenHashSet roots = new LongOpenHashSet();
  private final LongOpenHashSet onDevice = new LongOpenHashSet();
  private final LinkedHashMap<Long, Boolean> lru = new LinkedHashMap<>(16, 0.75f, true);
  private long eventId;
  private long hitBlocks;

  /**
   * @param capacity blocks the host holds, at least 1
   * @param transferNanos simulated nanoseconds to load one block into the device
   * @param out where the host-tier events go
   */
  public HostTier(Worker worker, int capacity, long transferNanos, Consumer<RouterEvent> out) {
    this(worker, capacity, transferNanos, out, h -> {});
  }

  /**
   * As above; {@code forgotten} hears each block this tier stops knowing (neither on the device nor
   * here any more), for callers that keep their own per-block data (the mock engine's token ids).
   */
  public HostTier(
      Worker worker,
      int capacity,
      long transferNanos,
      Consumer<RouterEvent> out,
      LongConsumer forgotten) {
    this.forgotten = forgotten;
    if (capacity < 1) throw new IllegalArgumentException("host blocks must be >= 1");
    this.worker = worker;
    this.capacity = capacity;
    this.transferNanos = transferNanos;
    this.out = out;
  }

  /** The device events, watched on their way to {@code device}. */
  public Consumer<RouterEvent> tap(Consumer<RouterEvent> device) {
    return e -> {
      switch (e.data()) {
        case CacheEvent.Stored s -> {
          long[] h = s.blockHashes();
          for (int i = 0; i < h.length; i++) {
            long parent = i > 0 ? h[i - 1] : s.hasParent() ? s.parentHash() : NO_PARENT;
            if (i == 0 && !s.hasParent()) roots.add(h[i]);
            else parentOf.put(h[i], parent);
            localOf.put(h[i], s.tokensHashes()[i]);
            onDevice.add(h[i]);
          }
        }
        case CacheEvent.Removed r -> {
          for (long h : r.blockHashes()) {
            if (onDevice.remove(h)) offload(h);
          }
        }
        case CacheEvent.Cleared c -> {
          // the device is empty: forget what is not here either (containsKey: no LRU touch)
          LongIterator it = onDevice.iterator();
          while (it.hasNext()) {
            long h = it.nextLong();
            if (!lru.containsKey(h)) forget(h);
          }
          onDevice.clear();
        }
      }
      device.accept(e);
    };
  }

  private void offload(long h) {
    if (lru.get(h) != null) return; // already here: touched
    if (!localOf.containsKey(h)) return; // never seen stored
    while (lru.size() >= capacity) {
      Iterator<Long> it = lru.keySet().iterator();
      long old = it.next();
      it.remove();
      out.accept(new RouterEvent(worker, eventId++, CacheEvent.removed(old)));
      if (!onDevice.contains(old)) forget(old);
    }
    lru.put(h, Boolean.TRUE);
    long[] seq = {h};
    long[] local = {localOf.get(h)};
    CacheEvent stored =
        roots.contains(h)
            ? CacheEvent.storedAtRoot(seq, local)
            : CacheEvent.stored(parentOf.get(h), seq, local);
    out.accept(new RouterEvent(worker, eventId++, stored));
  }

  private void forget(long h) {
    parentOf.remove(h);
    localOf.remove(h);
    roots.remove(h);
    forgotten.accept(h);
  }

  /** How many of {@code seq[from..]} are here, in a row from {@code from}; touches them. */
  public int hits(long[] seq, int from) {
    int k = 0;
    while (from + k < seq.length && lru.get(seq[from + k]) != null) k++;
    hitBlocks += k;
    return k;
  }

  /** Blocks served from here so far. */
  public long hitBlocks() {
    return hitBlocks;
  }

  /** Blocks held now. */
  public int size() {
    return lru.size();
  }

  /** Simulated nanoseconds to load one block from this tier into the device. */
  public long transferNanos() {
    return transferNanos;
  }
}
