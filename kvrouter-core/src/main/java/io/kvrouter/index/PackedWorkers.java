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
 * Interns worker ranks to dense {@code int} ids for a {@link PackedPositionalIndex}, each with its
 * {@link PackedWorker}: {@link WorkerTable}'s rules on PackedWorker.
 *
 * <pre>
 * Implementation notes
 *
 * Written by the index's writer; ids are handed out in order and never reused, so an id a slow
 * reader read from a block's holders keeps naming the same worker. byId is published with a
 * release store after the slot is filled; a reader that learnt an id from holders (acquire) and
 * then loads byId (acquire) always finds it.
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class PackedWorkers {
  private static final VarHandle BY_ID;

  static {
    try {
      BY_ID =
          MethodHandles.lookup().findVarHandle(PackedWorkers.class, "byId", PackedWorker[].class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private final Object2IntOpenHashMap<Worker> ids = new Object2IntOpenHashMap<>();

  @SuppressWarnings("unused") // through BY_ID
  private PackedWorker[] byId = new PackedWorker[8];

  private int next;
  private final IndexCounters counters;
  private final PackedPositionalIndex index;

  PackedWorkers(PackedPositionalIndex index, IndexCounters counters) {
    this.index = index;
    this.counters = counters;
    ids.defaultReturnValue(-1);
  }

  /** The state of {@code worker}, registering it on first sight. Writer-only. */
  PackedWorker intern(Worker worker) {
    int id = ids.getInt(worker);
    PackedWorker[] table = (PackedWorker[]) BY_ID.get(this);
    if (id >= 0) return table[id];
    id = next++;
    if (id == table.length) table = Arrays.copyOf(table, table.length * 2);
    PackedWorker ws = new PackedWorker(worker, id, index);
    table[id] = ws;
    BY_ID.setRelease(this, table);
    ids.put(worker, id);
    counters.inc(IndexCounters.WORKERS);
    return ws;
  }

  /** The state of {@code worker}, or null. Writer-only. */
  PackedWorker find(Worker worker) {
    int id = ids.getInt(worker);
    return id < 0 ? null : ((PackedWorker[]) BY_ID.get(this))[id];
  }

  /** Every rank of {@code workerId}. Writer-only. */
  List<PackedWorker> ranksOf(long workerId) {
    List<PackedWorker> out = new ArrayList<>();
    for (PackedWorker ws : live()) {
      if (ws.worker.workerId() == workerId) out.add(ws);
    }
    return out;
  }

  /** Forgets {@code ws}; its id is not reused. Writer-only. */
  void forget(PackedWorker ws) {
    ids.removeInt(ws.worker);
    ws.forgotten = true;
    counters.add(IndexCounters.WORKERS, -1);
  }

  /** Every known worker state, in id order. Writer-only. */
  List<PackedWorker> live() {
    PackedWorker[] table = (PackedWorker[]) BY_ID.get(this);
    List<PackedWorker> out = new ArrayList<>(ids.size());
    for (int i = 0; i < next; i++) {
      if (!table[i].forgotten) out.add(table[i]);
    }
    return out;
  }

  /** The id → state table as readers see it. */
  PackedWorker[] readerView() {
    return (PackedWorker[]) BY_ID.getAcquire(this);
  }
}
