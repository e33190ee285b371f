package io.kvrouter.index;

import io.kvrouter.event.Worker;
import it.unimi.dsi.fastutil.ints.Int2IntOpenHashMap;
import it.unimi.dsi.fastutil.ints.Int2LongOpenHashMap;
import it.unimi.dsi.fastutil.ints.IntArrayList;
import it.unimi.dsi.fastutil.ints.IntIterator;
import it.unimi.dsi.fastutil.ints.IntOpenHashSet;
import it.unimi.dsi.fastutil.longs.Long2IntMap;
import it.unimi.dsi.fastutil.longs.Long2IntOpenHashMap;
import it.unimi.dsi.fastutil.longs.LongArrayList;
import org.jspecify.annotations.NullUnmarked;

/**
 * One worker rank's bookkeeping in a {@link PackedPositionalIndex}: what {@link WorkerBlocks} and
 * {@link PositionalNames} keep for the object-based positional index, on block ids.
 *
 * <pre>
 * Implementation notes
 *
 * Names, as PositionalNames (see there for the rules and why they answer as a NameTable would):
 * the worker names block b by its key seq(b) exactly when it holds b (id or ~id in b's holders)
 * and b is not in unnamed; such a name costs nothing here and is found by a probe of the index's
 * table (ownNamed). Every other name is in others (hash -> id), made on first use; unnamed holds
 * blocks held, or held until a moment ago, but not named by key, made on first use.
 *
 * aliases counts the extra names of a block named twice (WorkerBlocks). heldBlocks counts distinct
 * blocks held (connected or detached; readers load it for tie-breaks), detachedCount those
 * detached. Writer-only except heldBlocks.
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class PackedWorker extends WorkerSlot {
  private final PackedPositionalIndex index;
  private Long2IntOpenHashMap others; // rare; lazily made
  private IntOpenHashSet unnamed; // rare; lazily made
  Int2IntOpenHashMap aliases; // rare; lazily made
  volatile int heldBlocks;
  int detachedCount;
  boolean forgotten;

  PackedWorker(Worker worker, int id, PackedPositionalIndex index) {
    super(worker, id);
    this.index = index;
  }

  /** Whether the worker holds block {@code b}, connected or detached. */
  private boolean holds(int b) {
    final int[] h = index.blocks.holders(b);
    return SortedIds.contains(h, id) || SortedIds.contains(h, ~id);
  }

  /** Whether the worker names block {@code b} by its key. */
  boolean namesByKey(int b) {
    return holds(b) && (unnamed == null || !unnamed.contains(b));
  }

  private int byKey(long seq) {
    return index.table().ownNamed(seq, this);
  }

  private void unname(int b) {
    if (unnamed == null) unnamed = new IntOpenHashSet();
    unnamed.add(b);
  }

  private int othersRemove(long seq) {
    return others == null ? -1 : others.remove(seq);
  }

  /** The block {@code seq} names, or -1. */
  int get(long seq) {
    final int other = others == null ? -1 : others.get(seq);
    return other >= 0 ? other : byKey(seq);
  }

  /** Names block {@code b} by {@code seq}; returns the block {@code seq} named before, or -1. */
  int put(long seq, int b) {
    if (index.blocks.seq(b) == seq) {
      int previous = othersRemove(seq);
      if (previous < 0) {
        previous = byKey(seq);
        if (previous >= 0 && previous != b) unname(previous);
      }
      if (unnamed != null) unnamed.remove(b);
      return previous;
    }
    final int byKey = byKey(seq); // its key is seq, so it is not b
    if (byKey >= 0) unname(byKey);
    final boolean bByKey = namesByKey(b);
    if (others == null) {
      others = new Long2IntOpenHashMap();
      others.defaultReturnValue(-1);
    }
    final int other = others.put(seq, b);
    if (!bByKey) unname(b);
    return byKey >= 0 ? byKey : other;
  }

  /** Forgets the name {@code seq}; returns the block it named, or -1. */
  int remove(long seq) {
    final int other = othersRemove(seq);
    if (other >= 0) return other;
    final int b = byKey(seq);
    if (b >= 0) unname(b);
    return b;
  }

  /**
   * Removes every name of block {@code b} other than its key (a bounded index's eviction drops them
   * all); returns them, or null when there were none. Scans the other names: none for an engine
   * that follows §2, which names every block by its key.
   */
  LongArrayList removeOtherNamesOf(int b) {
    if (others == null || others.isEmpty()) return null;
    LongArrayList out = null;
    for (Long2IntMap.Entry e : others.long2IntEntrySet()) {
      if (e.getIntValue() == b) {
        if (out == null) out = new LongArrayList();
        out.add(e.getLongKey());
      }
    }
    if (out != null) {
      for (int i = 0; i < out.size(); i++) others.remove(out.getLong(i));
    }
    return out;
  }

  /** After the worker stopped holding {@code b}. */
  void released(int b) {
    if (unnamed != null) unnamed.remove(b);
  }

  /** The worker's names. */
  int names() {
    int n = (others == null ? 0 : others.size()) + heldBlocks;
    if (unnamed != null) {
      for (IntIterator it = unnamed.iterator(); it.hasNext(); ) {
        if (holds(it.nextInt())) n--;
      }
    }
    return n;
  }

  boolean hasNames() {
    return names() > 0;
  }

  /** Names and blocks kept here rather than found in the table: none for a §2 engine. */
  int keptNames() {
    return (others == null ? 0 : others.size()) + (unnamed == null ? 0 : unnamed.size());
  }

  /** Forgets every name. */
  void clearNames() {
    others = null;
    unnamed = null;
  }

  /** Appends the block of every name (a block named twice is listed twice). */
  void addBlocksTo(IntArrayList out) {
    index.table().addOwnNamed(this, out);
    if (others != null) out.addAll(others.values());
  }

  /** Puts one name of every named block into {@code out} (block -> name). */
  void addNamesTo(Int2LongOpenHashMap out) {
    final IntArrayList own = new IntArrayList();
    index.table().addOwnNamed(this, own);
    for (int i = 0; i < own.size(); i++) out.put(own.getInt(i), index.blocks.seq(own.getInt(i)));
    if (others != null) {
      for (Long2IntMap.Entry e : others.long2IntEntrySet())
        out.put(e.getIntValue(), e.getLongKey());
    }
  }
}
