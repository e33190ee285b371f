package io.kvrouter.index;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.List;
import org.jspecify.annotations.NullUnmarked;

/**
 * One node of the compressed block tree ({@link CompressedTreeIndex}): a run of blocks, each the
 * child of the one before, reached from its parent by the local hash of its first block.
 *
 * <pre>
 * Implementation notes
 *
 * first   the local hash of the run's first block, the key in the parent's children. Final: a
 *         split keeps the head in this object and moves the tail to a new node, a merge appends
 *         the only child's run to this one, so the first block never changes.
 * state   everything a reader needs, in one immutable RunState (the run's hashes, its holders
 *         and their cutoffs, the children), published with a release store and read with an
 *         acquire load: a reader sees a run, its holders and its children as one writer left
 *         them, never a half-made split or merge. Every change publishes a new RunState (the
 *         hash arrays are shared between states whose run did not change).
 * parent  the node above; writer-only (it changes when a split or merge moves this node).
 * dead    writer-only: set when the node left the tree (pruned, or merged into its parent). A
 *         reader that still holds it sees its last state, which is valid for the blocks it names.
 * used    a bounded index's CLOCK bit (RunBound): 1 once a query's worker ended its match in this
 *         run (or a store used the run again) since the writer's hand last cleared it. Readers
 *         set it with an opaque store, and only after an opaque load saw 0, so a hot run costs
 *         readers one load and no write until the hand clears it; a lost or late mark only
 *         changes which cold run goes first, never a score. Unbounded indexes never touch it.
 * fresh   writer-only: a new run of the store being applied (the store does not mark it used;
 *         the hand passes over it while anything else may go). Cleared when the event ends.
 * head    writer-only: the canonical sequence hash of the run's first block (RunSeqs). Never
 *         changes (a split keeps the head here, a merge appends).
 * linked  writer-only: head is §2's hash of the parent's last block and this run's first local
 *         hash, so a merge into the parent keeps the merged run free of stored hashes (RunSeqs).
 * id      writer-only: the node's id in RunSeqs' table (RunNames slots point by it); 0 for the
 *         root and for a node that left the tree.
 * marks   writer-only: checkpoints of the run's canonical hashes, one every RunSeqs.K blocks,
 *         when its state keeps no seqs and it has more than K blocks; else null (RunSeqs).
 *
 * Layout: 12-byte header, first and head 8 each, parent, state, id and marks 4 each, four
 * bytes: 48.
 *
 * Written by the index's writer (under its lock or on its one thread); read by any number of
 * lock-free readers through state().
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class RunNode {
  private static final VarHandle STATE;
  private static final VarHandle USED;

  static {
    try {
      MethodHandles.Lookup l = MethodHandles.lookup();
      STATE = l.findVarHandle(RunNode.class, "state", RunState.class);
      USED = l.findVarHandle(RunNode.class, "used", byte.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  final long first;
  long head; // writer-only
  int id; // writer-only
  long[] marks; // writer-only (RunSeqs)
  RunNode parent; // writer-only
  boolean linked; // writer-only
  boolean dead; // writer-only
  boolean fresh; // writer-only

  @SuppressWarnings("unused") // through USED
  private byte used;

  @SuppressWarnings("unused") // through STATE
  private RunState state;

  RunNode(long first, RunNode parent, RunState state) {
    this.first = first;
    this.parent = parent;
    STATE.setRelease(this, state);
  }

  /** The state as readers see it (acquire load). */
  RunState state() {
    return (RunState) STATE.getAcquire(this);
  }

  /** The writer's own read of the state. Writer-only. */
  RunState plain() {
    return (RunState) STATE.get(this);
  }

  /** Publishes {@code s} (release store). Writer-only. */
  void publish(RunState s) {
    STATE.setRelease(this, s);
  }

  /** Sets the used bit (readers and the writer; opaque, a store only when it was clear). */
  void markUsed() {
    if ((byte) USED.getOpaque(this) == 0) USED.setOpaque(this, (byte) 1);
  }

  boolean isUsed() {
    return (byte) USED.getOpaque(this) != 0;
  }

  /** Clears the used bit. Writer-only (the clock hand). */
  void clearUsed() {
    USED.setOpaque(this, (byte) 0);
  }

  /** The child of a state's {@code children} whose first block has this local hash, or null. */
  static RunNode child(Object children, long local) {
    if (children instanceof RunChildren t) return t.get(local);
    RunNode only = (RunNode) children;
    return only != null && only.first == local ? only : null;
  }

  /** The number of children in a state's {@code children}. */
  static int childCount(Object children) {
    if (children == null) return 0;
    if (children instanceof RunChildren t) return t.size();
    return 1;
  }

  /** Appends every child in a state's {@code children} to {@code out}. Writer-side. */
  static void addChildren(Object children, List<RunNode> out) {
    if (children instanceof RunChildren t) t.addTo(out);
    else if (children != null) out.add((RunNode) children);
  }

  @Override
  public boolean equals(Object o) {
    return this == o;
  }

  @Override
  public int hashCode() {
    return System.identityHashCode(this);
  }
}
