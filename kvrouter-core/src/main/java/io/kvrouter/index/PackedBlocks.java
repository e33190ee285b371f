package io.kvrouter.index;

import it.unimi.dsi.fastutil.ints.Int2ObjectOpenHashMap;
import it.unimi.dsi.fastutil.ints.IntArrayList;
import it.unimi.dsi.fastutil.ints.IntOpenHashSet;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Arrays;
import org.jspecify.annotations.NullUnmarked;

/**
 * The blocks of a {@link PackedPositionalIndex} as records on dense int ids, in paged primitive
 * arrays: no object per block.
 *
 * <pre>
 * Implementation notes
 *
 * Layout, per id (page = id >>> PAGE_SHIFT, slot = id & PAGE_MASK), 28 bytes with no header:
 *   records[page][3*slot]      the block's key: the router's §2 hash of its path (seq)
 *   records[page][3*slot+1]    and its local hash
 *   records[page][3*slot+2]    its holders' set id (HolderSets) in the high 32 bits, its parent
 *                              id (NONE at the top, FREED once the id left) in the low 32
 *   children[page][slot]       NONE, the only child's id, or MANY (the ids are in the side map
 *                              many, made only for a block with two or more children)
 * So a reader's probe finds the key and the holders' set id on one cache line (two for a quarter
 * of the records, which straddle one), and the set itself among the few distinct holder arrays
 * (HolderSets), which stay in cache. Pages are PAGE ids (records 96 KB, children 16 KB): none is
 * humongous for G1, and growth adds a page and copies only the small outer arrays, published with
 * release stores after the page is filled. The 40-byte PositionalEntry (a 12-byte header, holders,
 * parent and children references) becomes 28 bytes.
 *
 * Holders follow IndexNode's rules (sorted ids, ~id for a detached worker, copy-on-write); a
 * change stores the record's third word with a release store after the set it names is
 * published; readers load it with acquire. Equal arrays share one set, so the parent-sharing of
 * IndexNode.publish is implied.
 *
 * Ids: handed out in order; an id freed by unlink goes to pending, and pending ids (block ids and
 * set ids both) go back into use only through reusable()/startReuse(), which the index brackets
 * with a version bump (SteppedIndex.bumpVersion): a reader whose walk spans a reuse retries, so a
 * walk that keeps its answer never saw an id change what it names (PackedPositionalIndex's
 * notes). A freed id keeps its key and its empty holders until it is reused. When the last block
 * goes, every page is dropped (again after a bump) so an emptied index gives its memory back.
 * Short of that, pages are kept: freed ids are reused last in, first out, with no compaction, so
 * an index that shrinks from a peak (a large clear that leaves a few blocks) keeps the peak's
 * pages until it empties or grows again; HolderSets' arrays likewise keep their peak length.
 *
 * Readers: keys and holders of ids they found in a table slot (acquire), through the outer arrays
 * loaded with acquire; an id beyond the pages (a walk that overlapped a reset, which the version
 * check then rejects) reads as a block with no key and no holders, never an exception.
 * Writers: the index's writer alone; children and many are writer-only.
 *
 * Bounded index only (PackedClockBound), two bits per id more, in pages of PAGE bits:
 *   usedPages[page]    the id's used bit (CLOCK). Readers set it with an atomic OR, only when it
 *                      is clear (no lock; a mark that lands on an id freed or reused meanwhile
 *                      only gives some block a second chance); the writer clears it with an
 *                      atomic AND, and allocate clears it for the block an id now names.
 *   queuedPages[page]  writer-only: whether the clock queue holds an entry naming the id (at
 *                      most one). Invariant: an id is in free or pending only while its queued
 *                      bit is clear, so the queue never names an id that went back into use. An
 *                      id freed while queued is parked (in neither list, counted in parked) and
 *                      goes to pending when the bound drops its entry (unqueued).
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class PackedBlocks {
  static final int NONE = -1;
  private static final int MANY = -2;
  private static final int FREED = -3;
  static final int PAGE_SHIFT = 12;
  static final int PAGE = 1 << PAGE_SHIFT;
  private static final int PAGE_MASK = PAGE - 1;
  private static final long LOW = 0xFFFF_FFFFL;

  private static final VarHandle RECORD_PAGES;
  private static final VarHandle USED_PAGES;
  private static final VarHandle WORD = MethodHandles.arrayElementVarHandle(long[].class);

  static {
    try {
      RECORD_PAGES =
          MethodHandles.lookup().findVarHandle(PackedBlocks.class, "recordPages", long[][].class);
      USED_PAGES =
          MethodHandles.lookup().findVarHandle(PackedBlocks.class, "usedPages", long[][].class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  @SuppressWarnings("unused") // through RECORD_PAGES
  private long[][] recordPages = new long[0][];

  private int[][] childPages = new int[0][];

  @SuppressWarnings("unused") // through USED_PAGES; bounded only
  private long[][] usedPages = new long[0][];

  private long[][] queuedPages = new long[0][]; // bounded only
  private final boolean bounded;
  private int parked; // freed while queued: in neither free nor pending
  private final Int2ObjectOpenHashMap<IntOpenHashSet> many = new Int2ObjectOpenHashMap<>();
  private final HolderSets sets = new HolderSets();

  private int next; // ids handed out (the high-water mark)
  private int live;
  private final IntArrayList free = new IntArrayList();
  private final IntArrayList pending = new IntArrayList();
  private final int reuseBatch;

  /**
   * Freed ids go back into use once {@code reuseBatch} of them wait (one version bump each); with
   * used and queued bits when {@code bounded} (class notes).
   */
  PackedBlocks(int reuseBatch, boolean bounded) {
    if (reuseBatch < 1) throw new IllegalArgumentException("reuseBatch must be >= 1");
    this.reuseBatch = reuseBatch;
    this.bounded = bounded;
  }

  // ------------------------------------------------------------------ reader side

  /** Whether block {@code id} has this key. Safe for lock-free readers. */
  boolean hasKey(int id, long seq, long local) {
    final long[][] rp = (long[][]) RECORD_PAGES.getAcquire(this);
    final int p = id >>> PAGE_SHIFT;
    if (p >= rp.length) return false;
    final long[] r = rp[p];
    final int o = (id & PAGE_MASK) * 3;
    return (long) WORD.getAcquire(r, o) == seq && (long) WORD.getAcquire(r, o + 1) == local;
  }

  /**
   * Block {@code id}'s holders when its key is (seq, local), else null: one record read. Safe for
   * lock-free readers.
   */
  int[] holdersIfKey(int id, long seq, long local) {
    final long[][] rp = (long[][]) RECORD_PAGES.getAcquire(this);
    final int p = id >>> PAGE_SHIFT;
    if (p >= rp.length) return null;
    final long[] r = rp[p];
    final int o = (id & PAGE_MASK) * 3;
    if ((long) WORD.getAcquire(r, o) != seq || (long) WORD.getAcquire(r, o + 1) != local) {
      return null;
    }
    return sets.get((int) ((long) WORD.getAcquire(r, o + 2) >>> 32));
  }

  /** Block {@code id}'s holders (acquire). Safe for lock-free readers. */
  int[] holders(int id) {
    final long[][] rp = (long[][]) RECORD_PAGES.getAcquire(this);
    final int p = id >>> PAGE_SHIFT;
    if (p >= rp.length) return SortedIds.NONE;
    return sets.get((int) ((long) WORD.getAcquire(rp[p], (id & PAGE_MASK) * 3 + 2) >>> 32));
  }

  /**
   * Sets block {@code id}'s used bit when it is clear (bounded only). Safe for lock-free readers:
   * an atomic OR, no lock; an id beyond the pages is skipped.
   */
  void markUsed(int id) {
    final long[][] up = (long[][]) USED_PAGES.getAcquire(this);
    final int p = id >>> PAGE_SHIFT;
    if (p >= up.length) return;
    final long[] u = up[p];
    final int w = (id & PAGE_MASK) >>> 6;
    final long bit = 1L << id;
    if (((long) WORD.getOpaque(u, w) & bit) == 0) WORD.getAndBitwiseOr(u, w, bit);
  }

  // ------------------------------------------------------------------ writer side

  /** Block {@code id}'s used bit (bounded only). Writer-side. */
  boolean isUsed(int id) {
    final long[] u = ((long[][]) USED_PAGES.get(this))[id >>> PAGE_SHIFT];
    return ((long) WORD.getOpaque(u, (id & PAGE_MASK) >>> 6) & (1L << id)) != 0;
  }

  /** Clears block {@code id}'s used bit (bounded only). Writer-side; readers may set it at once. */
  void clearUsed(int id) {
    final long[] u = ((long[][]) USED_PAGES.get(this))[id >>> PAGE_SHIFT];
    final int w = (id & PAGE_MASK) >>> 6;
    final long bit = 1L << id;
    if (((long) WORD.getOpaque(u, w) & bit) != 0) WORD.getAndBitwiseAnd(u, w, ~bit);
  }

  /** Whether the clock queue names {@code id} (bounded only). */
  boolean isQueued(int id) {
    return (queuedPages[id >>> PAGE_SHIFT][(id & PAGE_MASK) >>> 6] & (1L << id)) != 0;
  }

  /** The clock queue now names the linked block {@code id} (once). */
  void queued(int id) {
    if (parent(id) == FREED) throw new IllegalStateException("queueing a freed id");
    final long[] q = queuedPages[id >>> PAGE_SHIFT];
    final int w = (id & PAGE_MASK) >>> 6;
    if ((q[w] & (1L << id)) != 0) throw new IllegalStateException("queued twice");
    q[w] |= 1L << id;
  }

  /**
   * The clock queue dropped its entry naming {@code id}: a parked (freed) id may now go back into
   * use, after the next version bump (class notes).
   */
  void unqueued(int id) {
    final long[] q = queuedPages[id >>> PAGE_SHIFT];
    final int w = (id & PAGE_MASK) >>> 6;
    if ((q[w] & (1L << id)) == 0) throw new IllegalStateException("not queued");
    q[w] &= ~(1L << id);
    if (parent(id) == FREED) {
      parked--;
      pending.add(id);
    }
  }

  /** Freed ids waiting for the clock queue to drop its entry naming them, for tests. */
  int parked() {
    return parked;
  }

  private long[] page(int id) {
    return ((long[][]) RECORD_PAGES.get(this))[id >>> PAGE_SHIFT];
  }

  long seq(int id) {
    return page(id)[(id & PAGE_MASK) * 3];
  }

  long local(int id) {
    return page(id)[(id & PAGE_MASK) * 3 + 1];
  }

  int parent(int id) {
    return (int) page(id)[(id & PAGE_MASK) * 3 + 2];
  }

  private int setOf(int id) {
    return (int) (page(id)[(id & PAGE_MASK) * 3 + 2] >>> 32);
  }

  /** Whether {@code id} names a block (not freed; false for any id once every page went). */
  boolean isLinked(int id) {
    return (id >>> PAGE_SHIFT) < childPages.length && parent(id) != FREED;
  }

  boolean hasChildren(int id) {
    return childPages[id >>> PAGE_SHIFT][id & PAGE_MASK] != NONE;
  }

  /** Appends every child of {@code id} to {@code out}. */
  void addChildren(int id, IntArrayList out) {
    final int c = childPages[id >>> PAGE_SHIFT][id & PAGE_MASK];
    if (c >= 0) out.add(c);
    else if (c == MANY) out.addAll(many.get(id));
  }

  /** Publishes {@code a} as {@code id}'s holders (the set with its contents). Writer-only. */
  void publishHolders(int id, int[] a) {
    final long[] r = page(id);
    final int o = (id & PAGE_MASK) * 3 + 2;
    final long w = r[o];
    final int old = (int) (w >>> 32);
    // most blocks of a chain have their parent's holders: its set, without hashing the array
    final int p = (int) w;
    final int set;
    if (p >= 0 && a.length > 0) {
      final int ps = setOf(p);
      final int[] pa = sets.at(ps);
      set = pa == a || Arrays.equals(pa, a) ? sets.retain(ps) : sets.retain(a);
    } else {
      set = sets.retain(a);
    }
    WORD.setRelease(r, o, (long) set << 32 | (w & LOW));
    sets.release(old);
  }

  /** Distinct holder sets in use, for tests. */
  int holderSets() {
    return sets.size();
  }

  /** Whether the next allocate may hand out freed ids once the caller bumped the version. */
  boolean reusable() {
    return free.isEmpty() && pending.size() >= reuseBatch || sets.reusable(reuseBatch);
  }

  /** Moves the freed ids into use; the caller bumped the version first. */
  void startReuse() {
    if (free.isEmpty()) {
      free.addAll(pending);
      pending.clear();
    }
    sets.startReuse();
  }

  /**
   * A new block keyed (seq, local) under {@code parent} (NONE at the top), linked below it; not yet
   * in any table. Its key is stored with release stores, so a reader that finds the id in a table
   * slot (published after) or after a version bump (before) sees it.
   */
  int allocate(long seq, long local, int parent) {
    final int id;
    if (!free.isEmpty()) {
      id = free.popInt();
    } else {
      id = next++;
      if ((id >>> PAGE_SHIFT) == childPages.length) addPage();
    }
    final long[] r = page(id);
    final int o = (id & PAGE_MASK) * 3;
    WORD.setRelease(r, o, seq);
    WORD.setRelease(r, o + 1, local);
    // a freed id's set is the empty one (it was unheld): only the parent changes
    WORD.setRelease(r, o + 2, (long) HolderSets.EMPTY << 32 | (parent & LOW));
    childPages[id >>> PAGE_SHIFT][id & PAGE_MASK] = NONE;
    if (bounded) clearUsed(id); // a mark of the id's last block, or a late reader's
    if (parent >= 0) linkChild(parent, id);
    live++;
    return id;
  }

  private void addPage() {
    final int n = childPages.length;
    childPages = Arrays.copyOf(childPages, n + 1);
    childPages[n] = new int[PAGE];
    final long[][] rp = Arrays.copyOf((long[][]) RECORD_PAGES.get(this), n + 1);
    rp[n] = new long[3 * PAGE];
    RECORD_PAGES.setRelease(this, rp);
    if (bounded) {
      final long[][] up = Arrays.copyOf((long[][]) USED_PAGES.get(this), n + 1);
      up[n] = new long[PAGE >>> 6];
      USED_PAGES.setRelease(this, up);
      queuedPages = Arrays.copyOf(queuedPages, n + 1);
      queuedPages[n] = new long[PAGE >>> 6];
    }
  }

  private void linkChild(int parent, int child) {
    final int[] l = childPages[parent >>> PAGE_SHIFT];
    final int o = parent & PAGE_MASK;
    final int c = l[o];
    if (c == NONE) {
      l[o] = child;
    } else if (c >= 0) {
      IntOpenHashSet s = new IntOpenHashSet(4);
      s.add(c);
      s.add(child);
      many.put(parent, s);
      l[o] = MANY;
    } else {
      many.get(parent).add(child);
    }
  }

  private void unlinkChild(int parent, int child) {
    final int[] l = childPages[parent >>> PAGE_SHIFT];
    final int o = parent & PAGE_MASK;
    final int c = l[o];
    if (c == child) {
      l[o] = NONE;
    } else if (c == MANY && many.get(parent).remove(child)) {
      final IntOpenHashSet s = many.get(parent);
      if (s.size() == 1) {
        l[o] = s.iterator().nextInt();
        many.remove(parent);
      }
    } else {
      throw new IllegalStateException("not a child");
    }
  }

  /**
   * Takes the unheld, childless {@code id} (already out of the table) out of its parent and frees
   * it; it goes back into use only after startReuse. Returns whether no block is left.
   */
  boolean free(int id) {
    if (hasChildren(id)) throw new IllegalStateException("freeing a block with children");
    if (setOf(id) != HolderSets.EMPTY) throw new IllegalStateException("freeing a held block");
    final int p = parent(id);
    if (p == FREED) throw new IllegalStateException("freeing a freed block");
    if (p >= 0) unlinkChild(p, id);
    final long[] r = page(id);
    final int o = (id & PAGE_MASK) * 3 + 2;
    // a plain store, not a release one (class notes): only the parent half changes and the set
    // half stays EMPTY, so even a torn read gives a reader no holders
    r[o] = (r[o] & ~LOW) | (FREED & LOW);
    if (bounded && isQueued(id)) parked++; // the queue names it: not reusable yet (class notes)
    else pending.add(id);
    return --live == 0;
  }

  /**
   * Drops every page once no block is left; the caller bumped the version first and (bounded)
   * emptied the clock queue.
   */
  void reset() {
    if (live != 0) throw new IllegalStateException("blocks left");
    childPages = new int[0][];
    RECORD_PAGES.setRelease(this, new long[0][]);
    if (bounded) {
      USED_PAGES.setRelease(this, new long[0][]);
      queuedPages = new long[0][];
      parked = 0;
    }
    many.clear();
    free.clear();
    free.trim();
    pending.clear();
    pending.trim();
    next = 0;
  }

  /** Blocks in use. */
  int size() {
    return live;
  }

  /** Ids handed out so far (the high-water mark), for tests. */
  int handedOut() {
    return next;
  }

  /** Pages allocated, for tests. */
  int pages() {
    return childPages.length;
  }
}
