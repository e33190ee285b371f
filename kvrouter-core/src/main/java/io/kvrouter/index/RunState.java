package io.kvrouter.index;

import java.util.Arrays;
import org.jspecify.annotations.NullUnmarked;

/**
 * What a {@link RunNode} holds as one immutable value: its run of blocks, the workers that hold a
 * prefix of it, and its children.
 *
 * <pre>
 * Implementation notes
 *
 * locals, seqs  the run's local hashes and the sequence hashes its blocks were first stored
 *               under (the block's canonical name, RunNames), one each per block, in slots
 *               [0, len). seqs is null when every block after the first has §2's hash (the
 *               first's is RunNode.head): the usual case, whose hashes RunSeqs computes instead
 *               of storing. The arrays may be longer (spare capacity for appends): a writer that
 *               extends the run in place writes slots >= len, which no published state shows,
 *               and then publishes a state with the larger len; slots below any published len
 *               never change (a split copies), so states of one node may share the arrays.
 * ids, cuts     parallel: ids sorted, cuts[i] the number of leading blocks of the run worker
 *               ids[i] holds (1..length). A worker holds a prefix of every run it is in: writers
 *               split a run where that would not hold. ids[i] >= 0 (connected) when the worker
 *               also holds every block above the run, ~id (negative, sorted first, never equal to
 *               an id a reader looks for) when it misses one (a hole above: detached). So a
 *               connected worker with cut == length is the only kind that can be connected in a
 *               child. Readers score only the connected part (from connectedFrom()).
 * children      null, the only child (a RunNode), or a RunChildren table (two or more). A table
 *               is written in place with release stores (a child added or removed is one change a
 *               reader sees or not); a grown table, or a change between none, one and a table, is
 *               a new state.
 * </pre>
 */
@NullUnmarked // seqs may be null (notes)
final class RunState {
  static final int[] NONE = new int[0];
  private static final int[][] SINGLE = new int[256][];

  // the cuts of a node with one holder, shared (no state's cuts array is written after it is
  // published: every change copies), so that lowering or raising the cut of a run held by one
  // worker (the usual per-block Stored and Removed) allocates no array
  private static final int[][] SINGLE_CUT = new int[CompressedTreeIndex.MAX_RUN + 1][];

  static {
    for (int i = 0; i < SINGLE.length; i++) SINGLE[i] = new int[] {i};
    for (int i = 0; i < SINGLE_CUT.length; i++) SINGLE_CUT[i] = new int[] {i};
  }

  final long[] locals;
  final long[] seqs;
  final int[] ids;
  final int[] cuts;
  final Object children;
  final int len;

  RunState(long[] locals, long[] seqs, int[] ids, int[] cuts, Object children) {
    this(locals, seqs, ids, cuts, children, locals.length);
  }

  RunState(long[] locals, long[] seqs, int[] ids, int[] cuts, Object children, int len) {
    this.locals = locals;
    this.seqs = seqs;
    this.ids = ids;
    this.cuts = cuts;
    this.children = children;
    this.len = len;
  }

  int length() {
    return len;
  }

  RunState withChildren(Object c) {
    return new RunState(locals, seqs, ids, cuts, c, len);
  }

  /** The index of worker {@code id}'s entry (connected or detached), or -1. */
  int entry(int id) {
    int i = Arrays.binarySearch(ids, id);
    if (i >= 0) return i;
    if (ids.length == 0 || ids[0] >= 0) return -1;
    i = Arrays.binarySearch(ids, ~id);
    return i >= 0 ? i : -1;
  }

  /** Where the connected ids (>= 0) start. */
  static int connectedFrom(int[] ids) {
    if (ids.length == 0 || ids[0] >= 0) return 0;
    int i = Arrays.binarySearch(ids, 0);
    return i >= 0 ? i : -i - 1;
  }

  static int[] single(int id) {
    return id >= 0 && id < SINGLE.length ? SINGLE[id] : new int[] {id};
  }

  /** The cuts array {cut}, shared (never written). */
  static int[] singleCut(int cut) {
    return cut >= 0 && cut < SINGLE_CUT.length ? SINGLE_CUT[cut] : new int[] {cut};
  }

  /** This state with entry {@code e}'s cut set to {@code cut} (> 0), its id unchanged. */
  RunState withCut(int e, int cut) {
    if (cuts.length == 1) return new RunState(locals, seqs, ids, singleCut(cut), children, len);
    final int[] nc = cuts.clone();
    nc[e] = cut;
    return new RunState(locals, seqs, ids, nc, children, len);
  }

  /**
   * This state with worker {@code id} (either sign) given the entry {@code signedId} with {@code
   * cut}; cut 0 drops the entry.
   */
  RunState withEntry(int id, int signedId, int cut) {
    final int at = entry(id);
    final int n = ids.length;
    int[] ni;
    int[] nc;
    if (at >= 0 && ids[at] == signedId && cut > 0) {
      if (n == 1) return new RunState(locals, seqs, ids, singleCut(cut), children, len);
      nc = cuts.clone();
      nc[at] = cut;
      return new RunState(locals, seqs, ids, nc, children, len);
    }
    // remove the old entry, then insert the new one
    int[] bi = ids;
    int[] bc = cuts;
    if (at >= 0) {
      if (n == 1) {
        bi = NONE;
        bc = NONE;
      } else {
        bi = new int[n - 1];
        bc = new int[n - 1];
        System.arraycopy(ids, 0, bi, 0, at);
        System.arraycopy(ids, at + 1, bi, at, n - at - 1);
        System.arraycopy(cuts, 0, bc, 0, at);
        System.arraycopy(cuts, at + 1, bc, at, n - at - 1);
      }
    }
    if (cut <= 0)
      return new RunState(locals, seqs, bi.length == 1 ? single(bi[0]) : bi, bc, children, len);
    int pos = -Arrays.binarySearch(bi, signedId) - 1;
    int m = bi.length;
    if (m == 0) {
      ni = single(signedId);
      nc = singleCut(cut);
    } else {
      ni = new int[m + 1];
      nc = new int[m + 1];
      System.arraycopy(bi, 0, ni, 0, pos);
      System.arraycopy(bc, 0, nc, 0, pos);
      ni[pos] = signedId;
      nc[pos] = cut;
      System.arraycopy(bi, pos, ni, pos + 1, m - pos);
      System.arraycopy(bc, pos, nc, pos + 1, m - pos);
    }
    return new RunState(locals, seqs, ni, nc, children, len);
  }
}
