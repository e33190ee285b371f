package io.kvrouter.index;

import io.kvrouter.event.Worker;
import it.unimi.dsi.fastutil.objects.Object2IntOpenHashMap;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Interns worker ranks to dense {@code int} ids for the positional index.
 *
 * <pre>
 * Implementation notes
 *
 * The same scheme as WorkerTable, over PositionalWorker. Written by the index's writer; ids are
 * handed out in order and never reused, so an id read by a slow reader from an old entry keeps
 * naming the same worker. byId is published with a release store after the slot is filled; a
 * reader that learnt an id from an entry (acquire) and then loads byId (acquire) always finds it.
 * </pre>
 */
final class PositionalWorkers {
  private static final VarHandle BY_ID;

  static {
    try {
      BY_ID =
          MethodHandles.lookup()
              .findVarHandle(PositionalWorkers.class, "byId", PositionalWorker[].class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private final Object2IntOpenHashMap<Worker> ids = new Object2IntOpenHashMap<>();

  @SuppressWarnings("unused") // through BY_ID
  private PositionalWorker[] byId = new PositionalWorker[8];

  private int next;

  PositionalWorkers() {
    ids.defaultReturnValue(-1);
  }

  /** The state of {@code worker}, registering it on first sight. Writer-only. */
  PositionalWorker intern(Worker worker) {
    int id = ids.getInt(worker);
    PositionalWorker[] table = (PositionalWorker[]) BY_ID.get(this);
    if (id >= 0) return table[id];
    id = next++;
    if (id == table.length) table = Arrays.copyOf(table, table.length * 2);
    PositionalWorker ws = new PositionalWorker(worker, id);
    table[id] = ws;
    BY_ID.setRelease(this, table);
    ids.put(worker, id);
    return ws;
  }

  /** The state of {@code worker}, or null. Writer-only. */
  PositionalWorker find(Worker worker) {
    int id = ids.getInt(worker);
    return id < 0 ? null : ((PositionalWorker[]) BY_ID.get(this))[id];
  }

  /** Every rank of {@code workerId}. Writer-only. */
  List<PositionalWorker> ranksOf(long workerId) {
    List<PositionalWorker> out = new ArrayList<>();
    for (PositionalWorker ws : live()) {
      if (ws.worker.workerId() == workerId) out.add(ws);
    }
    return out;
  }

  /** Forgets {@code ws}; its id is not reused. Writer-only. */
  void forget(PositionalWorker ws) {
    ids.removeInt(ws.worker);
    ws.forgotten = true;
  }

  /** Every known worker state, in id order. Writer-only. */
  List<PositionalWorker> live() {
    PositionalWorker[] table = (PositionalWorker[]) BY_ID.get(this);
    List<PositionalWorker> out = new ArrayList<>(ids.size());
    for (int i = 0; i < next; i++) {
      if (!table[i].forgotten) out.add(table[i]);
    }
    return out;
  }

  int size() {
    return ids.size();
  }

  /** The id → state table as readers see it. */
  PositionalWorker[] readerView() {
    return (PositionalWorker[]) BY_ID.getAcquire(this);
  }
}
