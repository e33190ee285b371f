package io.kvrouter.index;

import io.kvrouter.event.Worker;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import it.unimi.dsi.fastutil.objects.Object2IntOpenHashMap;

/**
 * One worker rank's bookkeeping in the positional index: its engine's sequence hashes and the
 * entries they name.
 *
 * <pre>
 * Implementation notes
 *
 * Writer-only except heldBlocks, which readers load (volatile int) for tie-breaks.
 * blocks maps each sequence hash the engine stored to its entry. The engine's hash is only a
 * name: the entry is found by the router's own §2 hash of the path, derived from the parent
 * entry, so an engine whose hashes differ from §2 still lands on the right entry. An entry named
 * by two of the worker's hashes (the same content stored twice under different hashes) keeps one
 * count per extra name in aliases, so removing one name keeps the block held.
 * heldBlocks counts distinct entries held (connected or detached); detachedCount those detached.
 * </pre>
 */
final class PositionalWorker {
  final Worker worker;
  final int id;
  final Long2ObjectOpenHashMap<PositionalEntry> blocks = new Long2ObjectOpenHashMap<>();
  Object2IntOpenHashMap<PositionalEntry> aliases; // rare; lazily made
  volatile int heldBlocks;
  int detachedCount;
  boolean forgotten;

  PositionalWorker(Worker worker, int id) {
    this.worker = worker;
    this.id = id;
  }
}
