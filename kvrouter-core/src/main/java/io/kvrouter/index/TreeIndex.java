package io.kvrouter.index;

import it.unimi.dsi.fastutil.longs.LongArrayFIFOQueue;
import it.unimi.dsi.fastutil.objects.Object2ObjectOpenHashMap;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;
import org.jspecify.annotations.NullUnmarked;

/**
 * The block-tree index: one node per block position, reached from the root by local hashes, each
 * node listing the workers that hold it; behind {@link KvIndexes#radixTree()} and {@link
 * KvIndexes#concurrentRadixTree()}.
 *
 * <pre>
 * Implementation notes
 *
 * Layout: TreeNode objects (see there) under one root; the holder bookkeeping, holes and writes
 * are BlockIndex's, the reader's retry SteppedIndex's. This class adds the child links and the walk.
 *
 * Writers: under writeLock when the index is concurrent, on the caller's thread otherwise
 * (radixTree(): one thread at a time, documented as single-threaded).
 * Readers: findMatches takes no lock; it walks nodes by local hash, reading each node's holders
 * with acquire loads, and intersects them depth by depth. Because holders are prefix-closed
 * (BlockIndex), the walk needs no per-worker check, and readers never see a worker "jump" a hole.
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class TreeIndex extends BlockIndex<TreeNode> {
  private final boolean concurrent;

  /** 0 when recent-use frequencies are not tracked (the default). */
  private final long frequencyWindowNanos;

  private final LongSupplier nanoClock;

  /**
   * Per block, the times of the queries within the window that matched it; null unless recent-use
   * frequencies are tracked. A side map, so that nodes of the other kinds do not pay for it.
   */
  private final Object2ObjectOpenHashMap<TreeNode, LongArrayFIFOQueue> recentUses;

  TreeIndex(boolean concurrent) {
    this(concurrent, 0L, System::nanoTime, Long.MAX_VALUE);
  }

  /** A tree that holds at most {@code maxBlocks} (worker, block) pairs (BlockIndex notes). */
  TreeIndex(boolean concurrent, long maxBlocks) {
    this(concurrent, 0L, System::nanoTime, maxBlocks);
  }

  /**
   * A single-threaded tree that also counts, for every block on a query's matched path, the queries
   * within the last {@code frequencyWindowNanos} whose match covered it.
   */
  TreeIndex(boolean concurrent, long frequencyWindowNanos, LongSupplier clock) {
    this(concurrent, frequencyWindowNanos, clock, Long.MAX_VALUE);
  }

  private TreeIndex(
      boolean concurrent, long frequencyWindowNanos, LongSupplier clock, long maxBlocks) {
    super(
        maxBlocks == Long.MAX_VALUE
            ? new TreeNode(0L, 0L, null)
            : new BoundedTreeNode(0L, 0L, null),
        lockFor(concurrent, frequencyWindowNanos),
        null,
        maxBlocks);
    this.concurrent = concurrent;
    this.frequencyWindowNanos = frequencyWindowNanos;
    this.nanoClock = clock;
    this.recentUses = frequencyWindowNanos > 0 ? new Object2ObjectOpenHashMap<>() : null;
  }

  private static ReentrantLock lockFor(boolean concurrent, long frequencyWindowNanos) {
    if (concurrent && frequencyWindowNanos > 0) {
      throw new IllegalArgumentException("recent-use frequencies need the single-threaded tree");
    }
    return concurrent ? new ReentrantLock() : null;
  }

  boolean isConcurrent() {
    return concurrent;
  }

  // ------------------------------------------------------------------ reads

  @Override
  public OverlapScores findMatches(long[] localHashes, boolean earlyExit) {
    if (frequencyWindowNanos > 0) {
      Scores s = (Scores) walk(localHashes, earlyExit);
      return s.withFrequencies(touchPath(localHashes, s.maxScore()));
    }
    return super.findMatches(localHashes, earlyExit);
  }

  /**
   * Records a use of the first {@code depth} blocks of the query path and returns, per block, the
   * uses within the frequency window (this one included). Single-threaded kind only.
   */
  private int[] touchPath(long[] localHashes, int depth) {
    final long now = nanoClock.getAsLong();
    final long oldest = now - frequencyWindowNanos;
    final int[] out = new int[depth];
    TreeNode node = root;
    for (int i = 0; i < depth; i++) {
      node = node.child(localHashes[i]);
      if (node == null) return Arrays.copyOf(out, i);
      LongArrayFIFOQueue uses = recentUses.get(node);
      if (uses == null) recentUses.put(node, uses = new LongArrayFIFOQueue(4));
      while (!uses.isEmpty() && uses.firstLong() < oldest) uses.dequeueLong();
      uses.enqueue(now);
      out[i] = uses.size();
    }
    return out;
  }

  @Override
  OverlapScores walk(long[] localHashes, boolean earlyExit) {
    final int len = localHashes.length;
    if (len == 0) return Scores.EMPTY;
    TreeNode node = root.child(localHashes[0]);
    if (node == null) return Scores.EMPTY;
    int[] prev = node.holders();
    // a first block has no ancestor to miss, so no detached (negative) ids: from is 0
    final int from = IndexNode.connectedFrom(prev);
    final int m = prev.length - from;
    if (m == 0) return Scores.EMPTY;
    // a bounded tree marks each worker's deepest matched node (its leaf on this path, the only
    // kind of node the hand may take from it): where workers drop out, and where the walk ends
    final boolean mark = bounded;
    // alive ids in ids[0..alive), sorted; dropped ids after them with their final scores
    final int[] ids = Arrays.copyOfRange(prev, from, prev.length);
    final int[] scores = new int[m];
    int alive = m;
    int depth = 1;
    if (!(earlyExit && alive == 1)) {
      for (; depth < len; depth++) {
        final TreeNode next = node.child(localHashes[depth]);
        if (next == null) break;
        int[] h = next.holders();
        if (h != prev) {
          final int before = alive;
          alive = retain(ids, scores, alive, h, depth);
          prev = h;
          if (mark && alive < before) node.markUsed();
          if (alive == 0) break;
        }
        node = next;
        if (earlyExit && alive == 1) {
          depth++;
          break;
        }
      }
    }
    if (mark && alive > 0) node.markUsed();
    for (int i = 0; i < alive; i++) scores[i] = depth;
    return result(ids, scores, m);
  }

  /**
   * Keeps in {@code ids[0..alive)} the ids that are in {@code holders} (sorted); each other id is
   * swapped behind the alive range with {@code score} as its final score. Returns the new alive
   * count. Order inside the alive range does not matter.
   */
  private static int retain(int[] ids, int[] scores, int alive, int[] holders, int score) {
    int i = 0;
    while (i < alive) {
      int id = ids[i];
      if (Arrays.binarySearch(holders, id) >= 0) {
        i++;
      } else {
        alive--;
        ids[i] = ids[alive];
        ids[alive] = id;
        scores[alive] = score;
      }
    }
    return alive;
  }

  // ------------------------------------------------------------------ the node structure

  @Override
  TreeNode childFor(TreeNode parent, long local, long seq) {
    TreeNode c = parent.child(local);
    if (c != null) return c;
    c = parent.addChild(local, seq);
    nodeCreated(c);
    return c;
  }

  @Override
  TreeNode findChild(TreeNode parent, long local) {
    return parent.child(local);
  }

  @Override
  int countNodes() {
    int n = 0;
    ArrayList<TreeNode> stack = new ArrayList<>();
    root.addChildrenTo(stack);
    while (!stack.isEmpty()) {
      TreeNode t = stack.remove(stack.size() - 1);
      n++;
      t.addChildrenTo(stack);
    }
    return n;
  }

  @Override
  boolean hasChildren(TreeNode node) {
    return node.hasChildren();
  }

  @Override
  void addChildren(TreeNode node, List<TreeNode> out) {
    node.addChildrenTo(out);
  }

  @Override
  boolean isLinked(TreeNode node) {
    return node.parent.child(node.local) == node;
  }

  @Override
  void unlink(TreeNode node) {
    node.parent.removeChild(node);
    if (recentUses != null) recentUses.remove(node);
  }
}
