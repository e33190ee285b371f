package io.kvrouter.prefixcache;

import com.google.errorprone.annotations.FormatMethod;
import com.google.errorprone.annotations.FormatString;
import it.unimi.dsi.fastutil.longs.Long2IntOpenHashMap;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.OptionalInt;
import java.util.function.Consumer;

/**
 * A radix tree over token ids whose chains of single children are merged into labelled edges, each
 * token run of {@code granule} tokens carrying one value, with an LRU list of the unlocked leaves
 * for eviction (SGLang's RadixAttention cache, DESIGN.md §5).
 *
 * <p>Not thread-safe: an engine owns its tree and calls it from one thread.
 *
 * <pre>
 * Implementation notes
 *
 * Data layout. A node is an int id; ROOT = 0 always exists and has an empty label. Every
 * per-node field is a slot in a parallel array indexed by id (struct of arrays, no node
 * objects): label (int[], a multiple of granule tokens, never empty except for ROOT), vals
 * (Object[], one value per granule of the label), parent, the sibling list (firstChild,
 * nextSibling, prevSibling, doubly linked for O(1) unlink), childCount, lockCount, stamp,
 * the LRU links (lruPrev, lruNext, inLru) and the child-index links (mapKey, chainNext).
 * Ids below highWater have been handed out at least once; a dead id sits on the freeIds
 * stack and is reused (LIFO) before highWater grows. Arrays grow by doubling.
 *
 * Children index. One map for the whole tree, childIndex: long key -> child id, where the key
 * is derived from (parent id, first granule of the child's label). For granule 1 the key is
 * exact (parent << 32 | token); for larger granules it is a 64-bit hash of the run, so two
 * different (parent, run) pairs may share a key: children with the same key form a chain
 * through chainNext, the map holding its head, and every hit is confirmed by comparing the
 * parent and the full first run. A child's key is kept in mapKey so unlinking needs no
 * rehash. No boxing: matchPrefix does one map probe per edge plus Arrays.mismatch over the
 * label.
 *
 * Clock and LRU. clock advances on every matchPrefix and insert; each node on the walked path
 * gets stamp = clock. A node is walked when its whole label matched (a match that ends inside
 * an edge splits it first, so the walked part is a whole node). Hence stamp[parent] >=
 * stamp[child] and no two leaves share a stamp. The LRU list (lruHead oldest .. lruTail
 * newest) holds exactly the live non-root nodes with childCount == 0 and lockCount == 0,
 * sorted by stamp. A touched leaf moves to the tail in O(1); a new leaf is appended; a node
 * that becomes an unlocked leaf later (its last child evicted, or its last lock released)
 * joins at its own stamp by a walk from whichever end of the list is nearer in stamp.
 *
 * Locks. lockCount[n] = number of lock() calls on n or any descendant not yet undone, so
 * lockCount is non-increasing along any root-to-leaf path; a split's middle node inherits the
 * child's count. unlockedValues is the number of values in nodes with lockCount == 0: all of
 * them can be evicted by repeated leaf eviction, which is what PrefixCache's admission check
 * relies on.
 *
 * Writers and readers: all methods, one thread. matchPrefix mutates (stamps, splits); the
 * package-private peek is the read-only walk.
 * </pre>
 *
 * @param <V> the value stored per granule of tokens (a block id for an engine cache)
 */
public final class RadixTree<V> {
  /** The id of the root node, which always exists, has an empty label and holds no values. */
  public static final int ROOT = 0;

  private static final int NIL = -1;
  private static final int INITIAL_CAPACITY = 16;
  private static final int[] NO_TOKENS = new int[0];
  private static final Object[] NO_VALUES = new Object[0];

  /**
   * The result of {@link #matchPrefix}: how many tokens of the query the tree holds, and the ids of
   * the nodes walked from the root (root excluded), the last one ending exactly at the match.
   */
  public record Match(int matchedTokens, int[] path) {
    @Override
    public boolean equals(Object o) {
      return o instanceof Match m
          && matchedTokens == m.matchedTokens
          && Arrays.equals(path, m.path);
    }

    @Override
    public int hashCode() {
      return 31 * matchedTokens + Arrays.hashCode(path);
    }

    @Override
    public String toString() {
      return "Match[matchedTokens=" + matchedTokens + ", path=" + Arrays.toString(path) + "]";
    }
  }

  /**
   * The result of {@link #insert}: the node whose label ends where the key ends, and the caller's
   * values for the part of the key that was already stored (the stored values were kept).
   */
  public record Insert<V>(int node, List<V> handedBack) {}

  private final int granule;
  private final Long2IntOpenHashMap childIndex;

  private int[][] label;
  private Object[][] vals;
  private int[] parent;
  private int[] firstChild;
  private int[] nextSibling;
  private int[] prevSibling;
  private int[] childCount;
  private int[] lockCount;
  private long[] stamp;
  private int[] lruPrev;
  private int[] lruNext;
  private boolean[] inLru;
  private boolean[] live;
  private long[] mapKey;
  private int[] chainNext;

  private int highWater;
  private int[] freeIds;
  private int freeTop;

  private int nodeCount;
  private int size;
  private int unlockedValues;
  private long clock;
  private int lruHead = NIL;
  private int lruTail = NIL;

  private int[] pathScratch = new int[16];

  /**
   * An empty tree whose labels, matches and values come in runs of {@code granule} tokens.
   *
   * @throws IllegalArgumentException if {@code granule < 1}
   */
  public RadixTree(int granule) {
    if (granule < 1) {
      throw new IllegalArgumentException("granule must be >= 1, got " + granule);
    }
    this.granule = granule;
    this.childIndex = new Long2IntOpenHashMap();
    childIndex.defaultReturnValue(NIL);
    allocateArrays(INITIAL_CAPACITY);
    freeIds = new int[INITIAL_CAPACITY];
    label[ROOT] = NO_TOKENS;
    vals[ROOT] = NO_VALUES;
    parent[ROOT] = NIL;
    firstChild[ROOT] = NIL;
    nextSibling[ROOT] = NIL;
    prevSibling[ROOT] = NIL;
    lruPrev[ROOT] = NIL;
    lruNext[ROOT] = NIL;
    chainNext[ROOT] = NIL;
    live[ROOT] = true;
    highWater = 1;
  }

  /** Tokens per run: the unit of labels, matches, splits and values. */
  public int granule() {
    return granule;
  }

  /** Number of values stored (one per granule of every label). */
  public int size() {
    return size;
  }

  /** Whether the tree stores no value. */
  public boolean isEmpty() {
    return size == 0;
  }

  /** Number of live nodes, the root excluded. */
  public int nodeCount() {
    return nodeCount;
  }

  /** A copy of the edge label of {@code node} (empty for the root). */
  public int[] key(int node) {
    checkLive(node);
    return label[node].clone();
  }

  /** The values of {@code node}, one per granule of its label, in label order (unmodifiable). */
  public List<V> values(int node) {
    checkLive(node);
    return unmodifiable(vals[node].clone());
  }

  /** The parent of {@code node}; empty for the root. */
  public OptionalInt parent(int node) {
    checkLive(node);
    return node == ROOT ? OptionalInt.empty() : OptionalInt.of(parent[node]);
  }

  /** The ids of the children of {@code node}, in increasing id order. */
  public int[] children(int node) {
    checkLive(node);
    int[] out = new int[childCount[node]];
    int i = 0;
    for (int c = firstChild[node]; c != NIL; c = nextSibling[c]) {
      out[i++] = c;
    }
    Arrays.sort(out);
    return out;
  }

  /** Number of children of {@code node}. */
  public int childCount(int node) {
    checkLive(node);
    return childCount[node];
  }

  /**
   * Number of locks that pin {@code node}: those taken on it or on any descendant and not yet
   * released (always 0 for the root).
   */
  public int lockCount(int node) {
    checkLive(node);
    return lockCount[node];
  }

  /** The evictable leaves (unlocked, childless, not the root), oldest stamp first. */
  public int[] lruOrder() {
    int n = 0;
    for (int x = lruHead; x != NIL; x = lruNext[x]) {
      n++;
    }
    int[] out = new int[n];
    int i = 0;
    for (int x = lruHead; x != NIL; x = lruNext[x]) {
      out[i++] = x;
    }
    return out;
  }

  /**
   * Finds the longest prefix of {@code key} that the tree holds, in whole runs of {@link
   * #granule()} tokens. Advances the clock and stamps every node on the path; if the match ends
   * inside an edge, that edge is split there first (the new middle node ends the path, the old node
   * keeps its id and the lower part).
   */
  public Match matchPrefix(int[] key) {
    Objects.requireNonNull(key, "key");
    return matchPrefix(key, key.length);
  }

  /** {@link #matchPrefix(int[])} of {@code key[0..limit)}, without copying it. */
  public Match matchPrefix(int[] key, int limit) {
    Objects.requireNonNull(key, "key");
    Objects.checkFromToIndex(0, limit, key.length);
    final long now = ++clock;
    final int g = granule;
    int[] path = pathScratch;
    int depth = 0;
    int node = ROOT;
    int pos = 0;
    while (limit - pos >= g) {
      int c = findChild(node, key, pos);
      if (c == NIL) {
        break;
      }
      final int len = label[c].length;
      final int same = sharedTokens(c, key, pos, limit);
      if (same < len) {
        c = split(c, same);
      }
      if (depth == path.length) {
        path = pathScratch = Arrays.copyOf(path, depth * 2);
      }
      path[depth++] = c;
      touch(c, now);
      pos += same;
      if (same < len) {
        break;
      }
      node = c;
    }
    return new Match(pos, Arrays.copyOf(path, depth));
  }

  /**
   * Stores {@code values} under {@code key}, one value per run of {@link #granule()} tokens. The
   * part of the key already present keeps its stored values and the caller's values for it are
   * handed back; the rest becomes a new leaf. Advances the clock and stamps the whole path. An
   * empty key returns {@code (ROOT, [])}.
   *
   * @return the node whose label ends where {@code key} ends, and the handed-back values
   * @throws IllegalArgumentException unless {@code values.size() * granule == key.length}
   */
  public Insert<V> insert(int[] key, List<V> values) {
    Objects.requireNonNull(key, "key");
    return insert(key, key.length, values);
  }

  /** {@link #insert(int[], List)} of {@code key[0..limit)}, without copying it. */
  public Insert<V> insert(int[] key, int limit, List<V> values) {
    Objects.requireNonNull(key, "key");
    Objects.requireNonNull(values, "values");
    Objects.checkFromToIndex(0, limit, key.length);
    final int g = granule;
    if ((long) values.size() * g != limit) {
      throw new IllegalArgumentException(
          "need one value per "
              + g
              + " tokens: key has "
              + limit
              + " tokens but "
              + values.size()
              + " values were given");
    }
    final long now = ++clock;
    int node = ROOT;
    int pos = 0;
    while (pos < limit) {
      int c = findChild(node, key, pos);
      if (c == NIL) {
        break;
      }
      final int len = label[c].length;
      final int same = sharedTokens(c, key, pos, limit);
      if (same < len) {
        c = split(c, same);
      }
      touch(c, now);
      pos += same;
      node = c;
      if (same < len) {
        break;
      }
    }
    final int present = pos / g;
    final List<V> handedBack =
        present == 0 ? List.of() : RadixTree.<V>unmodifiable(values.subList(0, present).toArray());
    if (pos == limit) {
      return new Insert<>(node, handedBack);
    }
    final int leaf =
        newLeaf(node, key, pos, limit, values.subList(present, values.size()).toArray());
    stamp[leaf] = now;
    lruAppend(leaf);
    return new Insert<>(leaf, handedBack);
  }

  /**
   * Pins {@code node} and every ancestor: adds one to their lock counts and takes them off the LRU
   * list. Locking the root does nothing.
   */
  public void lock(int node) {
    checkLive(node);
    for (int n = node; n != ROOT; n = parent[n]) {
      if (lockCount[n]++ == 0) {
        unlockedValues -= vals[n].length;
        if (inLru[n]) {
          lruRemove(n);
        }
      }
    }
  }

  /**
   * Undoes one {@link #lock} of {@code node}: subtracts one from it and every ancestor; a leaf
   * whose count drops to 0 rejoins the LRU list at its own stamp. Unlocking the root does nothing,
   * like locking it.
   *
   * @throws IllegalStateException if {@code node} is not locked
   */
  public void unlock(int node) {
    checkLive(node);
    if (node == ROOT) {
      return;
    }
    if (lockCount[node] == 0) {
      throw new IllegalStateException("node " + node + " is not locked");
    }
    for (int n = node; n != ROOT; n = parent[n]) {
      if (--lockCount[n] == 0) {
        unlockedValues += vals[n].length;
        if (childCount[n] == 0) {
          lruInsertByStamp(n);
        }
      }
    }
  }

  /**
   * Evicts whole leaves, oldest stamp first, until at least {@code n} values are gone or no
   * unlocked leaf is left; a parent left childless and unlocked becomes evictable at its own stamp.
   * Each leaf is detached before {@code onEvict} sees its values (in label order), so the tree is
   * consistent during the callback.
   *
   * @return the number of values freed (≥ {@code n} unless the list ran dry)
   */
  public int evict(int n, Consumer<V> onEvict) {
    Objects.requireNonNull(onEvict, "onEvict");
    int freed = 0;
    while (freed < n && lruHead != NIL) {
      final int leaf = lruHead;
      final Object[] vs = vals[leaf];
      final int p = parent[leaf];
      lruRemove(leaf);
      unlinkChild(leaf);
      size -= vs.length;
      unlockedValues -= vs.length;
      release(leaf);
      if (p != ROOT && childCount[p] == 0 && lockCount[p] == 0) {
        lruInsertByStamp(p);
      }
      freed += vs.length;
      for (Object v : vs) {
        @SuppressWarnings("unchecked")
        V value = (V) v;
        onEvict.accept(value);
      }
    }
    return freed;
  }

  /**
   * Evicts the one leaf {@code node} now, whatever its stamp, when it is an unlocked leaf (not the
   * root, no children, lock count 0): detached like a leaf {@link #evict} takes, then {@code
   * onEvict} sees its values in label order. Otherwise changes nothing.
   *
   * @return the number of values freed (0 when {@code node} is not an unlocked leaf)
   */
  public int evictLeaf(int node, Consumer<V> onEvict) {
    Objects.requireNonNull(onEvict, "onEvict");
    checkLive(node);
    if (node == ROOT || childCount[node] != 0 || lockCount[node] != 0) return 0;
    final Object[] vs = vals[node];
    final int p = parent[node];
    if (inLru[node]) lruRemove(node);
    unlinkChild(node);
    size -= vs.length;
    unlockedValues -= vs.length;
    release(node);
    if (p != ROOT && childCount[p] == 0 && lockCount[p] == 0) {
      lruInsertByStamp(p);
    }
    for (Object v : vs) {
      @SuppressWarnings("unchecked")
      V value = (V) v;
      onEvict.accept(value);
    }
    return vs.length;
  }

  @Override
  public String toString() {
    return "RadixTree[granule=" + granule + ", nodes=" + nodeCount + ", values=" + size + "]";
  }

  // ---------------------------------------------------------------- package-private helpers

  /**
   * How many tokens of node {@code c}'s label, in whole granules, equal {@code key[pos..limit)}
   * from its start.
   */
  private int sharedTokens(int c, int[] key, int pos, int limit) {
    final int[] lab = label[c];
    final int n = Math.min(lab.length, limit - pos);
    final int m = Arrays.mismatch(lab, 0, n, key, pos, pos + n);
    final int same = m < 0 ? n : m;
    return same - same % granule;
  }

  /**
   * The read-only walk: like {@link #matchPrefix} over {@code key[0..limit)} but without stamping
   * or splitting. Returns {@code matchedTokens << 32 | unlockedMatchedValues}, the second being how
   * many of the matched values sit in nodes with lock count 0.
   */
  long peek(int[] key, int limit) {
    final int g = granule;
    int node = ROOT;
    int pos = 0;
    int unlocked = 0;
    while (limit - pos >= g) {
      final int c = findChild(node, key, pos);
      if (c == NIL) {
        break;
      }
      final int len = label[c].length;
      final int same = sharedTokens(c, key, pos, limit);
      if (lockCount[c] == 0) {
        unlocked += same / g;
      }
      pos += same;
      if (same < len) {
        break;
      }
      node = c;
    }
    return ((long) pos << 32) | unlocked;
  }

  /** The last value of {@code node}'s label, without copying (the root has none). */
  @SuppressWarnings("unchecked")
  V lastValue(int node) {
    checkLive(node);
    if (node == ROOT) {
      throw new IllegalArgumentException("the root holds no values");
    }
    final Object[] vs = vals[node];
    return (V) vs[vs.length - 1];
  }

  /** Number of values in unlocked nodes: what repeated eviction could free at most. */
  int evictableValues() {
    return unlockedValues;
  }

  /** The stamp of {@code node} (test support). */
  long stamp(int node) {
    checkLive(node);
    return stamp[node];
  }

  /**
   * Checks every structural invariant listed in the implementation notes and throws {@link
   * IllegalStateException} naming the first one broken (test support; O(nodes)).
   */
  void checkInvariants() {
    int seenNodes = 0;
    long seenValues = 0;
    long seenUnlocked = 0;
    int[] stack = new int[Math.max(16, nodeCount + 1)];
    int top = 0;
    stack[top++] = ROOT;
    while (top > 0) {
      final int n = stack[--top];
      int kids = 0;
      int lockSum = 0;
      for (int c = firstChild[n]; c != NIL; c = nextSibling[c]) {
        kids++;
        require(live[c], "child %d of %d is not live", c, n);
        require(parent[c] == n, "child %d of %d names parent %d", c, n, parent[c]);
        require(
            label[c].length > 0 && label[c].length % granule == 0,
            "label of %d has %d tokens",
            c,
            label[c].length);
        require(vals[c].length * granule == label[c].length, "node %d: values do not fit label", c);
        require(stamp[c] <= stamp[n] || n == ROOT, "child %d is newer than parent %d", c, n);
        require(lockCount[c] <= lockCount[n] || n == ROOT, "child %d locked above parent", c);
        require(findChild(n, label[c], 0) == c, "child index does not find %d under %d", c, n);
        lockSum += lockCount[c];
        if (top == stack.length) {
          stack = Arrays.copyOf(stack, top * 2);
        }
        stack[top++] = c;
      }
      require(kids == childCount[n], "node %d: childCount %d, found %d", n, childCount[n], kids);
      require(n == ROOT || lockCount[n] >= lockSum, "node %d: children hold more locks", n);
      if (n != ROOT) {
        seenNodes++;
        seenValues += vals[n].length;
        if (lockCount[n] == 0) {
          seenUnlocked += vals[n].length;
        }
        boolean evictable = childCount[n] == 0 && lockCount[n] == 0;
        require(
            inLru[n] == evictable, "node %d: inLru %s but evictable %s", n, inLru[n], evictable);
      }
    }
    require(seenNodes == nodeCount, "nodeCount %d, reachable %d", nodeCount, seenNodes);
    require(seenValues == size, "size %d, reachable values %d", size, seenValues);
    require(
        seenUnlocked == unlockedValues,
        "unlockedValues %d, found %d",
        unlockedValues,
        seenUnlocked);
    int liveIds = 0;
    for (int i = 1; i < highWater; i++) {
      if (live[i]) {
        liveIds++;
      }
    }
    require(liveIds == nodeCount, "%d live ids but %d reachable nodes", liveIds, nodeCount);
    require(
        freeTop + liveIds + 1 == highWater,
        "free list holds %d of %d dead ids",
        freeTop,
        highWater - 1 - liveIds);
    int inList = 0;
    long prevStamp = Long.MIN_VALUE;
    int prev = NIL;
    for (int x = lruHead; x != NIL; x = lruNext[x]) {
      require(inLru[x] && live[x], "LRU holds %d which is not marked", x);
      require(lruPrev[x] == prev, "LRU back link of %d broken", x);
      require(stamp[x] >= prevStamp, "LRU out of stamp order at %d", x);
      prevStamp = stamp[x];
      prev = x;
      inList++;
    }
    require(prev == lruTail, "LRU tail is %d, list ends at %d", lruTail, prev);
    int marked = 0;
    for (int i = 1; i < highWater; i++) {
      if (live[i] && inLru[i]) {
        marked++;
      }
    }
    require(inList == marked, "LRU list has %d nodes, %d marked", inList, marked);
    int indexed = 0;
    for (int head : childIndex.values()) {
      for (int c = head; c != NIL; c = chainNext[c]) {
        require(
            live[c] && mapKey[c] == childKey(parent[c], label[c], 0), "stale index entry %d", c);
        indexed++;
      }
    }
    require(indexed == nodeCount, "child index reaches %d nodes of %d", indexed, nodeCount);
  }

  @SuppressWarnings("unchecked")
  private static <V> List<V> unmodifiable(Object[] values) {
    return (List<V>) Collections.unmodifiableList(Arrays.asList(values));
  }

  @FormatMethod
  private static void require(boolean ok, @FormatString String format, Object... args) {
    if (!ok) {
      throw new IllegalStateException("RadixTree invariant broken: " + String.format(format, args));
    }
  }

  // ---------------------------------------------------------------- children index

  /** The map key of the child of {@code node} whose label starts with {@code key[pos..pos+g)}. */
  private long childKey(int node, int[] key, int pos) {
    final int g = granule;
    if (g == 1) {
      return ((long) node << 32) | (key[pos] & 0xFFFF_FFFFL);
    }
    long h = (node + 1L) * 0x9E37_79B9_7F4A_7C15L;
    for (int i = pos, end = pos + g; i < end; i++) {
      h = Long.rotateLeft(h ^ ((key[i] & 0xFFFF_FFFFL) * 0xC2B2_AE3D_27D4_EB4FL), 29);
      h *= 0x9E37_79B9_7F4A_7C15L;
    }
    return h ^ (h >>> 32);
  }

  /** The child of {@code node} whose first run equals {@code key[pos..pos+g)}, or NIL. */
  private int findChild(int node, int[] key, int pos) {
    int c = childIndex.get(childKey(node, key, pos));
    final int g = granule;
    while (c != NIL) {
      if (parent[c] == node && Arrays.equals(label[c], 0, g, key, pos, pos + g)) {
        return c;
      }
      c = chainNext[c];
    }
    return NIL;
  }

  private void linkChild(int p, int c) {
    final long k = childKey(p, label[c], 0);
    mapKey[c] = k;
    chainNext[c] = childIndex.get(k);
    childIndex.put(k, c);
    final int first = firstChild[p];
    nextSibling[c] = first;
    prevSibling[c] = NIL;
    if (first != NIL) {
      prevSibling[first] = c;
    }
    firstChild[p] = c;
    childCount[p]++;
  }

  private void unlinkChild(int c) {
    final int p = parent[c];
    final long k = mapKey[c];
    final int head = childIndex.get(k);
    if (head == c) {
      if (chainNext[c] == NIL) {
        childIndex.remove(k);
      } else {
        childIndex.put(k, chainNext[c]);
      }
    } else {
      int x = head;
      while (chainNext[x] != c) {
        x = chainNext[x];
      }
      chainNext[x] = chainNext[c];
    }
    final int prev = prevSibling[c];
    final int next = nextSibling[c];
    if (prev == NIL) {
      firstChild[p] = next;
    } else {
      nextSibling[prev] = next;
    }
    if (next != NIL) {
      prevSibling[next] = prev;
    }
    childCount[p]--;
  }

  /** Puts {@code nu} where {@code old} sits among its parent's children (same parent, same key). */
  private void replaceChild(int old, int nu) {
    final int p = parent[old];
    final long k = mapKey[old];
    mapKey[nu] = k;
    chainNext[nu] = chainNext[old];
    final int head = childIndex.get(k);
    if (head == old) {
      childIndex.put(k, nu);
    } else {
      int x = head;
      while (chainNext[x] != old) {
        x = chainNext[x];
      }
      chainNext[x] = nu;
    }
    final int prev = prevSibling[old];
    final int next = nextSibling[old];
    prevSibling[nu] = prev;
    nextSibling[nu] = next;
    if (prev == NIL) {
      firstChild[p] = nu;
    } else {
      nextSibling[prev] = nu;
    }
    if (next != NIL) {
      prevSibling[next] = nu;
    }
  }

  // ---------------------------------------------------------------- structure changes

  /**
   * Splits {@code c} after {@code at} tokens (0 < at < label length, a multiple of granule): a new
   * middle node takes the upper part of label and values, c's place under its parent, c's lock
   * count and stamp; c keeps its id, the lower part and its LRU position. Returns the middle.
   */
  private int split(int c, int at) {
    final int mid = allocate();
    final int[] lab = label[c];
    final Object[] vs = vals[c];
    final int cut = at / granule;
    label[mid] = Arrays.copyOfRange(lab, 0, at);
    vals[mid] = Arrays.copyOfRange(vs, 0, cut);
    label[c] = Arrays.copyOfRange(lab, at, lab.length);
    vals[c] = Arrays.copyOfRange(vs, cut, vs.length);
    parent[mid] = parent[c];
    lockCount[mid] = lockCount[c];
    stamp[mid] = stamp[c];
    replaceChild(c, mid);
    parent[c] = mid;
    linkChild(mid, c);
    return mid;
  }

  private int newLeaf(int p, int[] key, int from, int to, Object[] values) {
    final int leaf = allocate();
    label[leaf] = Arrays.copyOfRange(key, from, to);
    vals[leaf] = values;
    parent[leaf] = p;
    linkChild(p, leaf);
    if (inLru[p]) {
      lruRemove(p);
    }
    size += values.length;
    unlockedValues += values.length;
    return leaf;
  }

  private void touch(int n, long now) {
    stamp[n] = now;
    if (inLru[n] && n != lruTail) {
      lruRemove(n);
      lruAppend(n);
    }
  }

  // ---------------------------------------------------------------- ids

  private int allocate() {
    final int id;
    if (freeTop > 0) {
      id = freeIds[--freeTop];
    } else {
      if (highWater == parent.length) {
        allocateArrays(parent.length * 2);
      }
      id = highWater++;
    }
    parent[id] = NIL;
    firstChild[id] = NIL;
    nextSibling[id] = NIL;
    prevSibling[id] = NIL;
    childCount[id] = 0;
    lockCount[id] = 0;
    stamp[id] = 0;
    lruPrev[id] = NIL;
    lruNext[id] = NIL;
    inLru[id] = false;
    chainNext[id] = NIL;
    live[id] = true;
    nodeCount++;
    return id;
  }

  private void release(int id) {
    live[id] = false;
    label[id] = null;
    vals[id] = null;
    if (freeTop == freeIds.length) {
      freeIds = Arrays.copyOf(freeIds, freeTop * 2);
    }
    freeIds[freeTop++] = id;
    nodeCount--;
  }

  private void allocateArrays(int capacity) {
    if (label == null) {
      label = new int[capacity][];
      vals = new Object[capacity][];
      parent = new int[capacity];
      firstChild = new int[capacity];
      nextSibling = new int[capacity];
      prevSibling = new int[capacity];
      childCount = new int[capacity];
      lockCount = new int[capacity];
      stamp = new long[capacity];
      lruPrev = new int[capacity];
      lruNext = new int[capacity];
      inLru = new boolean[capacity];
      live = new boolean[capacity];
      mapKey = new long[capacity];
      chainNext = new int[capacity];
      return;
    }
    label = Arrays.copyOf(label, capacity);
    vals = Arrays.copyOf(vals, capacity);
    parent = Arrays.copyOf(parent, capacity);
    firstChild = Arrays.copyOf(firstChild, capacity);
    nextSibling = Arrays.copyOf(nextSibling, capacity);
    prevSibling = Arrays.copyOf(prevSibling, capacity);
    childCount = Arrays.copyOf(childCount, capacity);
    lockCount = Arrays.copyOf(lockCount, capacity);
    stamp = Arrays.copyOf(stamp, capacity);
    lruPrev = Arrays.copyOf(lruPrev, capacity);
    lruNext = Arrays.copyOf(lruNext, capacity);
    inLru = Arrays.copyOf(inLru, capacity);
    live = Arrays.copyOf(live, capacity);
    mapKey = Arrays.copyOf(mapKey, capacity);
    chainNext = Arrays.copyOf(chainNext, capacity);
  }

  private void checkLive(int node) {
    if (node < 0 || node >= highWater || !live[node]) {
      throw new IllegalArgumentException("no live node with id " + node);
    }
  }

  // ---------------------------------------------------------------- LRU list

  private void lruAppend(int n) {
    lruPrev[n] = lruTail;
    lruNext[n] = NIL;
    if (lruTail == NIL) {
      lruHead = n;
    } else {
      lruNext[lruTail] = n;
    }
    lruTail = n;
    inLru[n] = true;
  }

  private void lruRemove(int n) {
    final int prev = lruPrev[n];
    final int next = lruNext[n];
    if (prev == NIL) {
      lruHead = next;
    } else {
      lruNext[prev] = next;
    }
    if (next == NIL) {
      lruTail = prev;
    } else {
      lruPrev[next] = prev;
    }
    lruPrev[n] = NIL;
    lruNext[n] = NIL;
    inLru[n] = false;
  }

  /**
   * Inserts {@code n} after every listed node with a stamp ≤ its own, walking from the nearer end.
   */
  private void lruInsertByStamp(int n) {
    final long s = stamp[n];
    if (lruTail == NIL || stamp[lruTail] <= s) {
      lruAppend(n);
      return;
    }
    int after;
    if (s - stamp[lruHead] < stamp[lruTail] - s) {
      int x = lruHead;
      while (x != NIL && stamp[x] <= s) {
        x = lruNext[x];
      }
      after = x == NIL ? lruTail : lruPrev[x];
    } else {
      int x = lruTail;
      while (x != NIL && stamp[x] > s) {
        x = lruPrev[x];
      }
      after = x;
    }
    final int next = after == NIL ? lruHead : lruNext[after];
    lruPrev[n] = after;
    lruNext[n] = next;
    if (after == NIL) {
      lruHead = n;
    } else {
      lruNext[after] = n;
    }
    if (next == NIL) {
      lruTail = n;
    } else {
      lruPrev[next] = n;
    }
    inLru[n] = true;
  }
}
