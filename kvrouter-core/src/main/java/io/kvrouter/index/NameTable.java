package io.kvrouter.index;

import it.unimi.dsi.fastutil.longs.Long2ObjectMap;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import it.unimi.dsi.fastutil.longs.LongArrayList;
import it.unimi.dsi.fastutil.objects.Object2IntOpenHashMap;
import it.unimi.dsi.fastutil.objects.Object2LongOpenHashMap;
import java.util.List;
import org.jspecify.annotations.NullUnmarked;

/**
 * The sequence hashes one worker named its blocks by, each mapped to its block: a map from {@code
 * long} to node that stores no key for a block named by the block's own {@link IndexNode#seq}.
 *
 * <pre>
 * Implementation notes
 *
 * Almost every name is the node's own key: an engine that follows §2 names a positional entry by
 * the router's hash of its path, and names a tree node by the hash it was first stored under (the
 * same hash in every such engine). Those names live in own[], an open-addressing table of node
 * references with linear probing from a spread of node.seq, compared by node.seq. Any other name
 * (an engine with another chain seed, a tree node first stored by an engine that hashes
 * differently, a hash re-used for another block) lives in others, an ordinary map made on first
 * use. A hash names at most one block, so own[] never holds two nodes with the same seq, and a
 * hash is never both in own[] and in others.
 *
 * Each slot also has a 4-bit tag in tags[] (16 to a long): 0 empty, TOMBSTONE a removed entry,
 * else 4 bits of the key's hash other than those of its home slot. A probe reads tags and loads a
 * node (a likely cache miss) only on a matching tag, so a miss costs no node loads at all and a
 * hit about one. A slot costs 4.5 bytes, where a long-keyed map needs 12.
 *
 * Removal leaves a tombstone (no node load); lookups probe past tombstones and inserts reuse the
 * first one they pass. When live entries and tombstones would pass 3/4 of the capacity the table
 * is rebuilt from its live entries, grown by half when more than half of it is live (so it is
 * mostly between 1/2 and 3/4 full, where doubling would leave it between 3/8 and 3/4); it is
 * rebuilt at half size when under 1/8 full. Any capacity works: a key's home slot is the high
 * half of a multiply ("fastrange").
 *
 * A bounded index drops a block from a worker without knowing the names the worker gave it
 * (removeOtherNamesOf). Its tables therefore index others backwards (findsOtherNames): firstOther
 * maps a block to one of its names in others, and otherCount counts them for the rare block with
 * two or more (only those are scanned for). Unbounded indexes do not keep them.
 *
 * Writer-only: readers never touch it.
 *
 * Not final: the positional index's PositionalNames keeps its other names here and finds the
 * own names through the index's table instead of own[] (see there).
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
class NameTable<N extends IndexNode<N>> {
  private static final int MIN_CAPACITY = 16;
  private static final long PHI = 0x9E3779B97F4A7C15L;
  private static final int EMPTY = 0;
  private static final int TOMBSTONE = 15;

  private IndexNode<?>[] own = new IndexNode<?>[MIN_CAPACITY];
  private long[] tags = new long[tagWords(MIN_CAPACITY)];
  private int live; // nodes in own[]
  private int used; // live + tombstones
  private Long2ObjectOpenHashMap<N> others; // rare; lazily made
  private final boolean findsOtherNames;
  private Object2LongOpenHashMap<N> firstOther; // with findsOtherNames: a name in others per block
  private Object2IntOpenHashMap<N> otherCount; // ... and how many, for blocks with two or more

  /** With {@code findsOtherNames}, {@link #removeOtherNamesOf} needs no scan (class notes). */
  NameTable(boolean findsOtherNames) {
    this.findsOtherNames = findsOtherNames;
  }

  private static int home(long seq, int capacity) {
    return (int) ((((seq * PHI) >>> 32) * capacity) >>> 32);
  }

  /** Four bits of the key's hash apart from those of its home slot: 1 to 14. */
  private static int tag(long seq) {
    return 1 + (int) (((seq * PHI) >>> 8) & 0xF) % 14;
  }

  private static int tagWords(int capacity) {
    return (capacity + 15) >>> 4;
  }

  private static int tagAt(long[] tags, int i) {
    return (int) (tags[i >>> 4] >>> ((i & 15) << 2)) & 0xF;
  }

  private static void setTag(long[] tags, int i, int tag) {
    final int shift = (i & 15) << 2;
    final int w = i >>> 4;
    tags[w] = (tags[w] & ~(0xFL << shift)) | ((long) tag << shift);
  }

  /**
   * The slot of own[] that holds the node keyed {@code seq}; when there is none, {@code -1 - f}
   * where {@code f} is the slot an insert would take (the first tombstone or the empty slot that
   * ends the probe run).
   */
  private int find(long seq) {
    final long[] g = tags;
    final IndexNode<?>[] t = own;
    final int cap = t.length;
    final int tag = tag(seq);
    int free = -1;
    for (int i = home(seq, cap); ; i = i + 1 < cap ? i + 1 : 0) {
      final int x = tagAt(g, i);
      if (x == EMPTY) return -1 - (free >= 0 ? free : i);
      if (x == tag) {
        if (t[i].seq == seq) return i;
      } else if (x == TOMBSTONE && free < 0) {
        free = i;
      }
    }
  }

  /** The block {@code seq} names, or null. */
  @SuppressWarnings("unchecked")
  N get(long seq) {
    int i = find(seq);
    if (i >= 0) return (N) own[i];
    return others == null ? null : others.get(seq);
  }

  /** Names {@code node} by {@code seq}; returns the block {@code seq} named before, or null. */
  @SuppressWarnings("unchecked")
  N put(long seq, N node) {
    final int i = find(seq);
    final N previous;
    if (i >= 0) {
      previous = (N) own[i];
      if (node.seq == seq) {
        own[i] = node;
        return previous;
      }
      removeAt(i);
    } else {
      previous = others == null ? null : othersRemove(seq);
      if (node.seq == seq) {
        final int f = -1 - i;
        if (tagAt(tags, f) == TOMBSTONE) {
          occupy(f, node);
        } else if ((used + 1) * 4 <= own.length * 3) {
          used++;
          occupy(f, node);
        } else {
          rebuild(live * 2 > own.length ? own.length + (own.length >>> 1) : own.length);
          insert(seq, node);
        }
        return previous;
      }
    }
    if (others == null) {
      others = new Long2ObjectOpenHashMap<>();
      if (findsOtherNames) {
        firstOther = new Object2LongOpenHashMap<>();
        otherCount = new Object2IntOpenHashMap<>();
      }
    }
    others.put(seq, node);
    if (findsOtherNames) indexOther(seq, node);
    return previous;
  }

  /** Removes the name {@code seq} from others (and from the backward index); its block or null. */
  private N othersRemove(long seq) {
    final N n = others.remove(seq);
    if (n != null && findsOtherNames) unindexOther(seq, n);
    return n;
  }

  private void indexOther(long seq, N node) {
    if (!firstOther.containsKey(node)) {
      firstOther.put(node, seq);
    } else {
      otherCount.put(node, Math.max(2, otherCount.getInt(node) + 1));
    }
  }

  /** After {@code seq} left others. */
  private void unindexOther(long seq, N node) {
    final int c = otherCount.getInt(node); // 0: the block had only this name in others
    if (c == 0) {
      firstOther.removeLong(node);
      return;
    }
    if (c == 2) otherCount.removeInt(node);
    else otherCount.put(node, c - 1);
    if (firstOther.getLong(node) == seq) {
      // the indexed name went: find another (a block with two private names: rare)
      for (Long2ObjectMap.Entry<N> e : others.long2ObjectEntrySet()) {
        if (e.getValue() == node) {
          firstOther.put(node, e.getLongKey());
          break;
        }
      }
    }
  }

  /** Forgets the name {@code seq}; returns the block it named, or null. */
  @SuppressWarnings("unchecked")
  N remove(long seq) {
    final int i = find(seq);
    if (i < 0) return others == null ? null : othersRemove(seq);
    final N n = (N) own[i];
    removeAt(i);
    return n;
  }

  private void occupy(int i, IndexNode<?> node) {
    own[i] = node;
    setTag(tags, i, tag(node.seq));
    live++;
  }

  /** Puts {@code node}, keyed {@code seq}, in the first empty slot of its probe run. */
  private void insert(long seq, IndexNode<?> node) {
    final long[] g = tags;
    final int cap = own.length;
    int i = home(seq, cap);
    while (tagAt(g, i) != EMPTY) i = i + 1 < cap ? i + 1 : 0;
    own[i] = node;
    setTag(g, i, tag(seq));
    live++;
    used++;
  }

  private void removeAt(int i) {
    own[i] = null;
    setTag(tags, i, TOMBSTONE);
    live--;
    if (live * 8 < own.length && own.length > MIN_CAPACITY) {
      rebuild(Math.max(MIN_CAPACITY, own.length >>> 1));
    }
  }

  /** Re-inserts the live entries into a table of {@code capacity} slots, without tombstones. */
  private void rebuild(int capacity) {
    final IndexNode<?>[] old = own;
    // first load every key: independent loads the CPU overlaps (the nodes are mostly not in
    // cache); then insert in the same order without touching the nodes again
    final long[] keys = new long[live];
    int k = 0;
    for (IndexNode<?> n : old) {
      if (n != null) keys[k++] = n.seq;
    }
    own = new IndexNode<?>[capacity];
    tags = new long[tagWords(capacity)];
    live = 0;
    used = 0;
    k = 0;
    for (IndexNode<?> n : old) {
      if (n != null) insert(keys[k++], n);
    }
  }

  /**
   * Removes every name of {@code node} kept in the map of other names (not its own {@link
   * IndexNode#seq}) and returns them; null when there is none. With findsOtherNames it looks the
   * names up (a scan only for a block with two or more); else it scans that map.
   */
  LongArrayList removeOtherNamesOf(N node) {
    if (others == null) return null;
    if (findsOtherNames) {
      if (!firstOther.containsKey(node)) return null;
      if (!otherCount.containsKey(node)) {
        final long seq = firstOther.getLong(node);
        othersRemove(seq);
        LongArrayList one = new LongArrayList(1);
        one.add(seq);
        return one;
      }
    }
    LongArrayList out = null;
    for (Long2ObjectMap.Entry<N> e : others.long2ObjectEntrySet()) {
      if (e.getValue() == node) {
        if (out == null) out = new LongArrayList(2);
        out.add(e.getLongKey());
      }
    }
    if (out != null) {
      for (int i = 0; i < out.size(); i++) othersRemove(out.getLong(i));
    }
    return out;
  }

  /**
   * Tells the table that its worker no longer holds {@code node} under any name (after the last
   * name was removed). Nothing to do here; PositionalNames forgets what it noted about the block.
   */
  void released(N node) {}

  int size() {
    return live + (others == null ? 0 : others.size());
  }

  boolean isEmpty() {
    return size() == 0;
  }

  void clear() {
    own = new IndexNode<?>[MIN_CAPACITY];
    tags = new long[tagWords(MIN_CAPACITY)];
    live = 0;
    used = 0;
    others = null;
    firstOther = null;
    otherCount = null;
  }

  /** Appends the block of every name to {@code out}: a block with two names twice. */
  @SuppressWarnings("unchecked")
  void addBlocksTo(List<N> out) {
    for (IndexNode<?> n : own) {
      if (n != null) out.add((N) n);
    }
    if (others != null) out.addAll(others.values());
  }

  /** Puts every block in {@code out} with one of its names. */
  @SuppressWarnings("unchecked")
  void addNamesTo(Object2LongOpenHashMap<N> out) {
    for (IndexNode<?> n : own) {
      if (n != null) out.put((N) n, n.seq);
    }
    if (others != null) {
      for (Long2ObjectMap.Entry<N> e : others.long2ObjectEntrySet()) {
        out.put(e.getValue(), e.getLongKey());
      }
    }
  }
}
