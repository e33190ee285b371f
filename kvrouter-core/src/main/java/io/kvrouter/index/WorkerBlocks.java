package io.kvrouter.index;

import io.kvrouter.event.Worker;
import it.unimi.dsi.fastutil.objects.Object2IntOpenHashMap;
import org.jspecify.annotations.NullUnmarked;

/**
 * One worker rank's bookkeeping in an index: the sequence hashes it stored and the blocks they
 * name.
 *
 * <pre>
 * Implementation notes
 *
 * Writer-only except heldBlocks, which readers load (volatile int) for tie-breaks.
 * blocks maps each sequence hash the worker stored to its block (NameTable). The hash is only
 * the worker's name for the block: the block itself is found from its parent and local hash, so
 * an engine whose hashes differ from §2 still lands on the right block. A block named by two of the
 * worker's hashes (the same content stored twice under different hashes) keeps one count per
 * extra name in aliases, so removing one name keeps the block held.
 * heldBlocks counts distinct blocks held (connected or detached); detachedCount those detached.
 * The index chooses the kind of name table (Names): a NameTable, or for the positional index a
 * PositionalNames, which keeps no name that is the block's own key.
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class WorkerBlocks<N extends IndexNode<N>> extends WorkerSlot {
  final NameTable<N> blocks;
  Object2IntOpenHashMap<N> aliases; // rare; lazily made
  volatile int heldBlocks;
  int detachedCount;
  boolean forgotten;

  /**
   * With the name table {@code names} makes for this worker; {@code findsOtherNames} for a bounded
   * index (NameTable).
   */
  WorkerBlocks(Worker worker, int id, boolean findsOtherNames, Names<N> names) {
    super(worker, id);
    this.blocks = names.make(this, findsOtherNames);
  }

  /** Makes a worker's name table. */
  @FunctionalInterface
  interface Names<N extends IndexNode<N>> {
    NameTable<N> make(WorkerBlocks<N> ws, boolean findsOtherNames);
  }
}
