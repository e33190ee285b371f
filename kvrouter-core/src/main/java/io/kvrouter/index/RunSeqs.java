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
 * the run from the nearest checkpoint at or before o. Checkpoints (RunNode.marks, only on runs
 * with seqs == null and more than K blocks): marks[m - 1] is the canonical hash of block m * K,
 * so the fold from a checkpoint (or the head) takes at most K - 1 XXH3s, whatever the run's
 * length (MAX_RUN = 2,048: without them a lookup deep in a run cost up to 2,047). K = 64: a run
 * of up to 64 blocks keeps none (config B's runs are 64 blocks: its memory does not move), a
 * longer one 8 bytes per 64 blocks (0.125 B a block) plus a 16-byte array header, and the worst
 * case of one hash is 63 XXH3s (a fraction of a microsecond), where K = 32 would double the bytes
 * and K = 128 the worst case. The writer keeps them whenever a run's blocks change: newRun,
 * extend and merge append them (setMarks, from hashes the store or the merged child gives), a
 * split gives the tail its own (foldMarks) and cuts the head's (cut).
 *
 * The fold is kept (memo: the hashes of blocks [memoFrom, memoFrom + memoLen) of memoNode), so a
 * walk along one run (a store, a removal deepest first, a split's repointing) costs one hash a
 * block, and a block already folded none. A store's new blocks enter the memo from the store's
 * own hashes (learn), so naming them folds nothing. The memo stays valid while the blocks of its
 * run below its end stay the same: a run only changes below its length when it is cut (split,
 * trim), and those call shortened(); appends (extend, merge) go past its length.
 *
 * folds counts the XXH3s seqAt computed (tests: the checkpoint bound, RunSeqsMarksTest).
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

  /** Blocks between two checkpoints of a run's hashes (class notes). */
  static final int K = 64;

  private RunNode memoNode;
  private long[] memo = new long[16];
  private int memoFrom; // the offset of memo[0]
  private int memoLen;

  /** XXH3s computed by seqAt (class notes). Writer-only. */
  long folds;

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
    int at = o - memoFrom; // the memo's index of block o
    if (memoNode != x || at < 0 || o - (memoFrom + memoLen - 1) > o % K) {
      // no memo of this run, or one that ends before o's checkpoint: fold from the checkpoint
      final int base = o - o % K;
      memoNode = x;
      memoFrom = base;
      memo[0] = base == 0 ? x.head : x.marks[base / K - 1];
      memoLen = 1;
      at = o - base;
    }
    if (at < memoLen) return memo[at];
    if (at >= memo.length) memo = Arrays.copyOf(memo, Math.max(at + 1, memo.length * 2));
    final long[] l = st.locals;
    long prev = memo[memoLen - 1];
    for (int k = memoLen; k <= at; k++) {
      prev = next(prev, l[memoFrom + k]);
      memo[k] = prev;
    }
    folds += at + 1 - memoLen;
    memoLen = at + 1;
    return prev;
  }

  /**
   * Block {@code o} (>= 1) of {@code x}'s run now has the canonical hash {@code seq}, which the
   * caller knows (a store's own hashes of the blocks it appended): the memo takes it when it ends
   * just before {@code o}, or starts over at {@code o}'s run when it is another run's. Saves the
   * fold a later seqAt of the block would cost.
   */
  void learn(RunNode x, int o, long seq) {
    if (memoNode == x) {
      if (memoFrom + memoLen != o) return;
    } else {
      memoNode = x;
      memoFrom = o;
      memoLen = 0;
    }
    if (memoLen == memo.length) memo = Arrays.copyOf(memo, memo.length * 2);
    memo[memoLen++] = seq;
  }

  /**
   * Sets the checkpoints of {@code x}'s blocks {@code [from, to)} from their canonical hashes
   * {@code hashes[i + o - from]}: a run with seqs == null that got those blocks appended (class
   * notes). The caller publishes the blocks before or after; marks are writer-only.
   */
  static void setMarks(RunNode x, int from, int to, long[] hashes, int i) {
    final int first = Math.max(K, (from + K - 1) / K * K);
    if (first >= to) return;
    ensureMarks(x, to);
    for (int o = first; o < to; o += K) x.marks[o / K - 1] = hashes[i + o - from];
  }

  /** Block {@code o} of {@code x}'s run (seqs == null) now has the canonical hash {@code seq}. */
  static void mark(RunNode x, int o, long seq) {
    if (o % K != 0 || o == 0) return;
    ensureMarks(x, o + 1);
    x.marks[o / K - 1] = seq;
  }

  /** Gives {@code x}'s checkpoints room for a run of {@code len} blocks. */
  private static void ensureMarks(RunNode x, int len) {
    final int need = (len - 1) / K;
    if (need == 0) return;
    if (x.marks == null) x.marks = new long[need];
    else if (x.marks.length < need) x.marks = Arrays.copyOf(x.marks, need);
  }

  /**
   * Sets the checkpoints of {@code to}'s blocks {@code [toFrom, toFrom + n)}, which are {@code
   * from}'s blocks {@code [fromOff, fromOff + n)} (a split's tail, a merge's child), folding along
   * {@code from} (one hash a block at most, through the memo). Call before {@code from}'s run
   * changes.
   */
  void foldMarks(RunNode from, int fromOff, RunNode to, int toFrom, int n) {
    final int first = Math.max(K, (toFrom + K - 1) / K * K);
    if (first >= toFrom + n) return;
    ensureMarks(to, toFrom + n);
    for (int o = first; o < toFrom + n; o += K) {
      to.marks[o / K - 1] = seqAt(from, fromOff + o - toFrom);
    }
  }

  /** {@code x}'s run was cut to {@code len} blocks: its checkpoints past it go. */
  static void cutMarks(RunNode x, int len) {
    if (x.marks == null) return;
    final int need = (len - 1) / K;
    if (need == 0) x.marks = null;
    else if (need < x.marks.length) x.marks = Arrays.copyOf(x.marks, need);
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
    if (memoNode == x && memoFrom + memoLen > len) memoLen = Math.max(0, len - memoFrom);
    if (memoNode == x && memoLen == 0) memoNode = null;
    cutMarks(x, len);
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
