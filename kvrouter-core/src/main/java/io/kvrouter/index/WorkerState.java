package io.kvrouter.index;

import io.kvrouter.event.Worker;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;

/**
 * One worker rank's bookkeeping in a tree index: its sequence hashes and the nodes they name.
 *
 * <pre>
 * Implementation notes
 *
 * Writer-only except heldBlocks, which readers load (plain int, no tearing) for tie-breaks.
 * blocks maps each sequence hash the worker stored to its node; a node named by two of the
 * worker's hashes (the same content stored twice under different hashes) keeps one reference
 * per extra name in aliases, so removing one name keeps the block held.
 * </pre>
 */
final class WorkerState {
  final Worker worker;
  final int id;
  final Long2ObjectOpenHashMap<TreeNode> blocks = new Long2ObjectOpenHashMap<>();
  it.unimi.dsi.fastutil.objects.Object2IntOpenHashMap<TreeNode> aliases; // rare; lazily made
  volatile int heldBlocks;
  int detachedCount;
  boolean forgotten;

  WorkerState(Worker worker, int id) {
    this.worker = worker;
    this.id = id;
  }
}
