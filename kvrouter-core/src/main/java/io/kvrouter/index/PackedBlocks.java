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
 *   keys[page][2*slot], [2*slot+1]   the block's key: the router's §2 hash of its path (seq) and
 *                                    its local hash, side by side (one cache line for a compare)
 *   holders[page][slot]              sorted holder ids (IndexNode's rules: ~id for detached),
 *                                    copy-on-write, release store / acquire load; shared with the
 *                                    parent's array when equal
 *   links[page][2*slot]              the parent id, NONE at the top, FREED once the id left
 *   links[page][2*slot+1]            the children: NONE, the only child's id, or MANY (the ids
 *                                    are in the side map many, made only for a block with two or
 *                                    more children)
 * Pages are PAGE ids (keys 64 KB, holders 16 KB, links 32 KB): none is humongous for G1, and
 * growth adds a page and copies only the small outer arrays, published with release stores
 * after the page is filled. So an object per block (the 40-byte PositionalEntry: a 12-byte
 * header, parent and children references) becomes 28 bytes.
 *
 * Ids: handed out in order; an id freed by unlink goes to pending, and pending ids go back into
 * use (free) only through reusable()/startReuse(), which the index brackets with a version bump
 * (SteppedIndex.bumpVersion): a reader whose walk spans a reuse retries, so a walk that keeps its
 * answer never saw an id change blocks (PackedPositionalIndex's notes). A freed id keeps its key
 * and its (empty) holders until it is reused. When the last block goes, every page is dropped
 * (again after a bump) so an emptied index gives its memory back.
 *
 * Readers: keys and holders of ids they found in a table slot (acquire), through the outer arrays
 * loaded with acquire; an id beyond the pages (a walk that overlapped a reset, which the version
 * check then rejects) reads as a block with no key and no holders, never an exception.
 * Writers: the index's writer alone; links and many are writer-only.
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

  private static final VarHandle KEY_PAGES;
  private static final VarHandle HOLDER_PAGES;
  private static final VarHandle KEY = MethodHandles.arrayElementVarHandle(long[].class);
  private static final VarHandle HOLDERS = MethodHandles.arrayElementVarHandle(int[][].class);

  static {
    try {
      MethodHandles.Lookup l = MethodHandles.lookup();
      KEY_PAGES = l.findVarHandle(PackedBlocks.class, "keyPages", long[][].class);
      HOLDER_PAGES = l.findVarHandle(PackedBlocks.class, "holderPages", int[][][].class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  @SuppressWarnings("unused") // through KEY_PAGES
  private long[][] keyPages = new long[0][];

  @SuppressWarnings("unused") // through HOLDER_PAGES
  private int[][][] holderPages = new int[0][][];

  private int[][] linkPages = new int[0][];
  private final Int2ObjectOpenHashMap<IntOpenHashSet> many = new Int2ObjectOpenHashMap<>();

  private int next; // ids handed out (the high-water mark)
  private int live;
  private final IntArrayList free = new IntArrayList();
  private final IntArrayList pending = new IntArrayList();
  private final int reuseBatch;

  /** Freed ids go back into use once {@code reuseBatch} of them wait (one version bump each). */
  PackedBlocks(int reuseBatch) {
    if (reuseBatch < 1) throw new IllegalArgumentException("reuseBatch must be >= 1");
    this.reuseBatch = reuseBatch;
  }

  // ------------------------------------------------------------------ reader side

  /** Whether block {@code id} has this key. Safe for lock-free readers. */
  boolean hasKey(int id, long seq, long local) {
    final long[][] kp = (long[][]) KEY_PAGES.getAcquire(this);
    final int p = id >>> PAGE_SHIFT;
    if (p >= kp.length) return false;
    final long[] k = kp[p];
    final int o = (id & PAGE_MASK) << 1;
    return (long) KEY.getAcquire(k, o) == seq && (long) KEY.getAcquire(k, o + 1) == local;
  }

  /** Block {@code id}'s holders (acquire). Safe for lock-free readers. */
  int[] holders(int id) {
    final int[][][] hp = (int[][][]) HOLDER_PAGES.getAcquire(this);
    final int p = id >>> PAGE_SHIFT;
    if (p >= hp.length) return SortedIds.NONE;
    return (int[]) HOLDERS.getAcquire(hp[p], id & PAGE_MASK);
  }

  // ------------------------------------------------------------------ writer side

  long seq(int id) {
    return ((long[][]) KEY_PAGES.get(this))[id >>> PAGE_SHIFT][(id & PAGE_MASK) << 1];
  }

  long local(int id) {
    return ((long[][]) KEY_PAGES.get(this))[id >>> PAGE_SHIFT][((id & PAGE_MASK) << 1) + 1];
  }

  int parent(int id) {
    return linkPages[id >>> PAGE_SHIFT][(id & PAGE_MASK) << 1];
  }

  /** Whether {@code id} names a block (not freed; false for any id once every page went). */
  boolean isLinked(int id) {
    return (id >>> PAGE_SHIFT) < linkPages.length && parent(id) != FREED;
  }

  boolean hasChildren(int id) {
    return linkPages[id >>> PAGE_SHIFT][((id & PAGE_MASK) << 1) + 1] != NONE;
  }

  /** Appends every child of {@code id} to {@code out}. */
  void addChildren(int id, IntArrayList out) {
    final int c = linkPages[id >>> PAGE_SHIFT][((id & PAGE_MASK) << 1) + 1];
    if (c >= 0) out.add(c);
    else if (c == MANY) out.addAll(many.get(id));
  }

  /** Publishes {@code a} as {@code id}'s holders, sharing its parent's array when equal. */
  void publishHolders(int id, int[] a) {
    final int p = parent(id);
    if (p >= 0 && a.length > 0) {
      final int[] ph = holders(p);
      if (ph != a && Arrays.equals(ph, a)) a = ph;
    }
    final int[][][] hp = (int[][][]) HOLDER_PAGES.get(this);
    HOLDERS.setRelease(hp[id >>> PAGE_SHIFT], id & PAGE_MASK, a);
  }

  /** Whether the next allocate may hand out freed ids once the caller bumped the version. */
  boolean reusable() {
    return free.isEmpty() && pending.size() >= reuseBatch;
  }

  /** Moves the freed ids into use; the caller bumped the version first. */
  void startReuse() {
    free.addAll(pending);
    pending.clear();
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
      if ((id >>> PAGE_SHIFT) == linkPages.length) addPage();
    }
    final long[] k = ((long[][]) KEY_PAGES.get(this))[id >>> PAGE_SHIFT];
    final int o = (id & PAGE_MASK) << 1;
    KEY.setRelease(k, o, seq);
    KEY.setRelease(k, o + 1, local);
    final int[] l = linkPages[id >>> PAGE_SHIFT];
    l[o] = parent;
    l[o + 1] = NONE;
    if (parent >= 0) linkChild(parent, id);
    live++;
    return id;
  }

  private void addPage() {
    final int n = linkPages.length;
    linkPages = Arrays.copyOf(linkPages, n + 1);
    linkPages[n] = new int[2 * PAGE];
    final long[][] kp = Arrays.copyOf((long[][]) KEY_PAGES.get(this), n + 1);
    kp[n] = new long[2 * PAGE];
    final int[][][] hp = Arrays.copyOf((int[][][]) HOLDER_PAGES.get(this), n + 1);
    final int[][] h = new int[PAGE][];
    Arrays.fill(h, SortedIds.NONE);
    hp[n] = h;
    KEY_PAGES.setRelease(this, kp);
    HOLDER_PAGES.setRelease(this, hp);
  }

  private void linkChild(int parent, int child) {
    final int[] l = linkPages[parent >>> PAGE_SHIFT];
    final int o = ((parent & PAGE_MASK) << 1) + 1;
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
    final int[] l = linkPages[parent >>> PAGE_SHIFT];
    final int o = ((parent & PAGE_MASK) << 1) + 1;
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
    final int[] l = linkPages[id >>> PAGE_SHIFT];
    final int o = (id & PAGE_MASK) << 1;
    final int p = l[o];
    if (p == FREED) throw new IllegalStateException("freeing a freed block");
    if (p >= 0) unlinkChild(p, id);
    l[o] = FREED;
    pending.add(id);
    return --live == 0;
  }

  /** Drops every page once no block is left; the caller bumped the version first. */
  void reset() {
    if (live != 0) throw new IllegalStateException("blocks left");
    linkPages = new int[0][];
    KEY_PAGES.setRelease(this, new long[0][]);
    HOLDER_PAGES.setRelease(this, new int[0][][]);
    many.clear();
    free.clear();
    pending.clear();
    next = 0;
  }

  /** Blocks in use. */
  int size() {
    return live;
  }

  /** Pages allocated, for tests. */
  int pages() {
    return linkPages.length;
  }
}
