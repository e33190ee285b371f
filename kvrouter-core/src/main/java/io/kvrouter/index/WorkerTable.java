package io.kvrouter.index;

import io.kvrouter.event.Worker;
import it.unimi.dsi.fastutil.objects.Object2IntOpenHashMap;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;

/**
 * Interns worker ranks to dense {@code int} ids for one index.
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
final class WorkerTable {
  private static final VarHandle BY_ID;

  static {
    try {
      BY_ID = MethodHandles.lookup().findVarHandle(WorkerTable.class, "byId", WorkerState[].class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private final Object2IntOpenHashMap<Worker> ids = new Object2IntOpenHashMap<>();

  @SuppressWarnings("unused") // through BY_ID
  private WorkerState[] byId = new WorkerState[8];

  private int next;

  WorkerTable() {
    ids.defaultReturnValue(-1);
  }

  /** The state of {@code worker}, registering it on first sight. Writer-only. */
  WorkerState intern(Worker worker) {
    int id = ids.getInt(worker);
    WorkerState[] table = (WorkerState[]) BY_ID.get(this);
    if (id >= 0) return table[id];
    id = next++;
    if (id == table.length) {
      table = java.util.Arrays.copyOf(table, table.length * 2);
    }
    WorkerState ws = new WorkerState(worker, id);
    table[id] = ws;
    BY_ID.setRelease(this, table);
    ids.put(worker, id);
    return ws;
  }

  /** The state of {@code worker}, or null. Writer-only. */
  WorkerState find(Worker worker) {
    int id = ids.getInt(worker);
    return id < 0 ? null : ((WorkerState[]) BY_ID.get(this))[id];
  }

  /** Every rank of {@code workerId}. Writer-only. */
  List<WorkerState> ranksOf(long workerId) {
    List<WorkerState> out = new ArrayList<>();
    for (WorkerState ws : live()) {
      if (ws.worker.workerId() == workerId) out.add(ws);
    }
    return out;
  }

  /** Forgets {@code ws}; its id is not reused. Writer-only. */
  void forget(WorkerState ws) {
    ids.removeInt(ws.worker);
    ws.forgotten = true;
  }

  /** Every known worker state, in id order. Writer-only. */
  List<WorkerState> live() {
    WorkerState[] table = (WorkerState[]) BY_ID.get(this);
    List<WorkerState> out = new ArrayList<>(ids.size());
    for (int i = 0; i < next; i++) {
      if (!table[i].forgotten) out.add(table[i]);
    }
    return out;
  }

  int size() {
    return ids.size();
  }

  /** The id → state table as readers see it. */
  WorkerState[] readerView() {
    return (WorkerState[]) BY_ID.getAcquire(this);
  }
}
