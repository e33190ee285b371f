package io.kvrouter.index;

import io.kvrouter.event.Worker;
import it.unimi.dsi.fastutil.objects.Object2IntOpenHashMap;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.jspecify.annotations.NullUnmarked;

/**
 * Interns worker ranks to dense {@code int} ids for one index, each with its {@link WorkerBlocks}.
 *
 * <pre>
 * Implementation notes
 *
 * Written by the index's writer; ids are handed out in order and never reused, so an id read by
 * a slow reader from an old node keeps naming the same worker. byId is published with a release
 * store after the slot is filled; a reader that learnt an id from a node (acquire) and then loads
 * byId (acquire) always finds it.
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class WorkerTable<N extends IndexNode<N>> {
  private static final VarHandle BY_ID;

  static {
    try {
      BY_ID = MethodHandles.lookup().findVarHandle(WorkerTable.class, "byId", WorkerBlocks[].class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private final Object2IntOpenHashMap<Worker> ids = new Object2IntOpenHashMap<>();

  @SuppressWarnings("unused") // through BY_ID
  private WorkerBlocks<N>[] byId = newArray(8);

  private int next;

  private final boolean findsOtherNames;
  private final IndexCounters counters;

  /**
   * With {@code findsOtherNames}, every worker's NameTable indexes its other names (bound); the
   * count of known workers goes to {@code counters}.
   */
  private final WorkerBlocks.Names<N> names;

  /** With {@code names} making each worker's name table. */
  WorkerTable(boolean findsOtherNames, IndexCounters counters, WorkerBlocks.Names<N> names) {
    this.names = names;
    this.findsOtherNames = findsOtherNames;
    this.counters = counters;
    ids.defaultReturnValue(-1);
  }

  @SuppressWarnings("unchecked")
  private static <N extends IndexNode<N>> WorkerBlocks<N>[] newArray(int n) {
    return (WorkerBlocks<N>[]) new WorkerBlocks<?>[n];
  }

  /** The state of {@code worker}, registering it on first sight. Writer-only. */
  WorkerBlocks<N> intern(Worker worker) {
    int id = ids.getInt(worker);
    WorkerBlocks<N>[] table = (WorkerBlocks<N>[]) BY_ID.get(this);
    if (id >= 0) return table[id];
    id = next++;
    if (id == table.length) {
      table = Arrays.copyOf(table, table.length * 2);
    }
    WorkerBlocks<N> ws = new WorkerBlocks<>(worker, id, findsOtherNames, names);
    table[id] = ws;
    BY_ID.setRelease(this, table);
    ids.put(worker, id);
    counters.inc(IndexCounters.WORKERS);
    return ws;
  }

  /** The state of {@code worker}, or null. Writer-only. */
  WorkerBlocks<N> find(Worker worker) {
    int id = ids.getInt(worker);
    return id < 0 ? null : ((WorkerBlocks<N>[]) BY_ID.get(this))[id];
  }

  /** The state of the worker with this id (one named by a node's holders). Writer-only. */
  WorkerBlocks<N> byId(int id) {
    return ((WorkerBlocks<N>[]) BY_ID.get(this))[id];
  }

  /** Every rank of {@code workerId}. Writer-only. */
  List<WorkerBlocks<N>> ranksOf(long workerId) {
    List<WorkerBlocks<N>> out = new ArrayList<>();
    for (WorkerBlocks<N> ws : live()) {
      if (ws.worker.workerId() == workerId) out.add(ws);
    }
    return out;
  }

  /** Forgets {@code ws}; its id is not reused. Writer-only. */
  void forget(WorkerBlocks<N> ws) {
    ids.removeInt(ws.worker);
    ws.forgotten = true;
    counters.add(IndexCounters.WORKERS, -1);
  }

  /** Every known worker state, in id order. Writer-only. */
  List<WorkerBlocks<N>> live() {
    WorkerBlocks<N>[] table = (WorkerBlocks<N>[]) BY_ID.get(this);
    List<WorkerBlocks<N>> out = new ArrayList<>(ids.size());
    for (int i = 0; i < next; i++) {
      if (!table[i].forgotten) out.add(table[i]);
    }
    return out;
  }

  /** The id → state table as readers see it. */
  WorkerBlocks<N>[] readerView() {
    return (WorkerBlocks<N>[]) BY_ID.getAcquire(this);
  }
}
