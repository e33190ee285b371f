package io.kvrouter.index;

import io.kvrouter.event.Worker;

/**
 * What {@link Scores} reads of an index's per-worker state: the worker and its dense id. {@link
 * WorkerBlocks} (the block and radix trees) and {@link RunWorker} (the compressed tree) extend it,
 * so one scores class serves every tree kind. Immutable; published with the worker table.
 */
abstract class WorkerSlot {
  final Worker worker;
  final int id;

  WorkerSlot(Worker worker, int id) {
    this.worker = worker;
    this.id = id;
  }
}
