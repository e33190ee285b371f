package io.kvrouter.index;

import io.kvrouter.hash.SequenceHasher;
import java.util.Arrays;
import org.jspecify.annotations.NullUnmarked;

/**
 * The sequence hashes of a {@link CompressedTreeIndex}'s blocks, kept only where DESIGN.md §2 does
 * not give them, and the table of node ids the workers' name tables ({@link RunNames}) point into.
 *
 * <pre>
 * Implementation notes
 *
 * A block's canonical hash is the sequence hash it was first stored under (RunNames). A run keeps
 * the canonical hash of its first block in RunNode.head; a run whose state has seqs == null keeps
 * no other: the hash of its block o > 0 is §2's, next(hash of block o - 1, locals[o]) (default
 * chain seed). A run with a block that departs from that rule (an engine with its own hashing, a
 * chain seed other than 1337, a block named first by another engine) keeps every block's hash in
 * seqs, as before. So an engine that follows §2 costs one 8-byte head per run and nothing per
 * block; any other costs what it always did.
 *
 * seqAt(x, o) gives the canonical hash of block (x, o): seqs[o], the head, or a fold of §2 along
 * the run from the head. The fold is kept (memo: the hashes of blocks [0, memoLen) of memoNode),
 * so a walk along one run (a store, a removal deepest first, a split's repointing) costs one
 * hash a block, and a block already folded none. The memo stays valid while the blocks of its
 * run below memoLen stay the same: a run only changes below its length when it is cut (split,
 * trim), and those call shortened(); appends (extend, merge) go past its length.
 *
 * Node ids: a live non-root node has an id in [1, 2^26) (RunNames packs it in a slot), given at
 * creation (register) and taken back when the node leaves the tree (release). Free ids are
 * reused, so ids stay dense: the table is about 4 bytes a node.
 *
 * Writer-only: readers never touch it.
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class RunSeqs {
  /** Ids are below this (RunNames keeps 26 bits for them). */
  static final int MAX_NODES = 1 << 26;

  private RunNode[] byId = new RunNode[64];
  private int[] free = new int[16];
  private int freeCount;
  private int nextId = 1; // 0 is no node

  private RunNode memoNode;
  private long[] memo = new long[16];
  private int memoLen;

  /** §2's sequence hash of a block under a block with hash {@code prev}. */
  static long next(long prev, long local) {
    return SequenceHasher.next(prev, local);
  }

  /** Gives {@code n} an id. */
  void register(RunNode n) {
    final int id;
    if (freeCount > 0) {
      id = free[--freeCount];
    } else {
      if (nextId >= MAX_NODES) {
        throw new IllegalStateException(
            "the compressed tree holds " + (MAX_NODES - 1) + " runs, its most");
      }
      id = nextId++;
      if (id == byId.length) byId = Arrays.copyOf(byId, byId.length * 2);
    }
    byId[id] = n;
    n.id = id;
  }

  /** Takes back the id of {@code n}, which left the tree. */
  void release(RunNode n) {
    final int id = n.id;
    if (id <= 0 || byId[id] != n) return;
    byId[id] = null;
    n.id = 0;
    if (freeCount == free.length) free = Arrays.copyOf(free, free.length * 2);
    free[freeCount++] = id;
    if (memoNode == n) memoNode = null;
  }

  RunNode node(int id) {
    return byId[id];
  }

  /** The ids in use (for footprint estimates). */
  int idCapacity() {
    return byId.length;
  }

  /** The canonical sequence hash of block ({@code x}, {@code o}), {@code o < length}. */
  long seqAt(RunNode x, int o) {
    final RunState st = x.plain();
    if (st.seqs != null) return st.seqs[o];
    if (o == 0) return x.head;
    if (memoNode != x || memoLen == 0) {
      memoNode = x;
      memo[0] = x.head;
      memoLen = 1;
    }
    if (o < memoLen) return memo[o];
    if (o >= memo.length) memo = Arrays.copyOf(memo, Math.max(o + 1, memo.length * 2));
    final long[] l = st.locals;
    long prev = memo[memoLen - 1];
    for (int k = memoLen; k <= o; k++) {
      prev = next(prev, l[k]);
      memo[k] = prev;
    }
    memoLen = o + 1;
    return prev;
  }

  /** Every block's canonical hash of {@code x}'s run, in an array of {@code capacity} slots. */
  long[] all(RunNode x, int capacity) {
    final RunState st = x.plain();
    final int len = st.length();
    if (st.seqs != null) return Arrays.copyOf(st.seqs, capacity);
    final long[] out = new long[capacity];
    for (int o = 0; o < len; o++) out[o] = seqAt(x, o);
    return out;
  }

  /** {@code x}'s run now has {@code len} blocks (a split or trim cut it): the memo follows. */
  void shortened(RunNode x, int len) {
    if (memoNode == x && memoLen > len) memoLen = len;
  }

  /**
   * Whether {@code seqs[i..i+n)} follow §2 along their own chain: each after the first is next() of
   * the one before and its local hash.
   */
  static boolean chained(long[] seqs, long[] locals, int i, int n) {
    for (int j = i + 1; j < i + n; j++) {
      if (seqs[j] != next(seqs[j - 1], locals[j])) return false;
    }
    return true;
  }
}
