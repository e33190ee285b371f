package io.kvrouter.index;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import it.unimi.dsi.fastutil.objects.Object2IntOpenHashMap;
import it.unimi.dsi.fastutil.objects.Object2LongOpenHashMap;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A {@link BlockIndex} written out as events ({@link KvIndex#dump()}), and the depth order that
 * both the dump and a clear need.
 *
 * <pre>
 * Implementation notes
 *
 * Writer-side: the index calls it under its writer discipline, so it reads WorkerBlocks and node
 * links without synchronisation. Per worker: one Stored event per connected block, shallowest
 * first (so each parent comes before its children), under the worker's own hashes; a lone Cleared
 * event when none is connected, so the worker stays known. Detached blocks are left out: they
 * score nothing. Nodes keep no depth; byDepth measures it along parent links, each walk stopping
 * at a node already measured, so a list costs O(nodes on the paths) hash-map operations.
 * </pre>
 */
final class BlockDump {
  private BlockDump() {}

  /** Every live worker of {@code index}, in id order. Writer-side. */
  static <N extends IndexNode<N>> List<RouterEvent> of(BlockIndex<N> index) {
    List<RouterEvent> out = new ArrayList<>();
    for (WorkerBlocks<N> ws : index.workers.live()) dumpWorker(index.root, ws, out);
    return out;
  }

  private static <N extends IndexNode<N>> void dumpWorker(
      N root, WorkerBlocks<N> ws, List<RouterEvent> out) {
    final Worker worker = ws.worker;
    final int id = ws.id;
    Object2LongOpenHashMap<N> seqOf = new Object2LongOpenHashMap<>();
    ws.blocks.addNamesTo(seqOf);
    List<N> connected = new ArrayList<>();
    for (N n : seqOf.keySet()) {
      if (n.isHolder(id)) connected.add(n);
    }
    long eventId = 0;
    for (N n : byDepth(root, connected, false)) {
      long[] seq = {seqOf.getLong(n)};
      long[] local = {n.local};
      CacheEvent ev =
          n.parent == root
              ? CacheEvent.storedAtRoot(seq, local)
              : CacheEvent.stored(seqOf.getLong(n.parent), seq, local);
      out.add(new RouterEvent(worker, eventId++, ev));
    }
    if (connected.isEmpty()) out.add(new RouterEvent(worker, eventId, CacheEvent.cleared()));
  }

  /** {@code list} sorted by depth below {@code root}: deepest first, or shallowest first. */
  static <N extends IndexNode<N>> List<N> byDepth(N root, List<N> list, boolean deepestFirst) {
    final int n = list.size();
    final long[] keys = new long[n];
    final Object2IntOpenHashMap<N> depthOf = new Object2IntOpenHashMap<>();
    depthOf.defaultReturnValue(-1);
    final List<N> path = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      path.clear();
      N a = list.get(i);
      int d = 0;
      while (a != root && a != null) {
        int known = depthOf.getInt(a);
        if (known >= 0) {
          d = known;
          break;
        }
        path.add(a);
        a = a.parent;
      }
      for (int k = path.size() - 1; k >= 0; k--) depthOf.put(path.get(k), ++d);
      keys[i] = (long) (deepestFirst ? -d : d) << 32 | i;
    }
    Arrays.sort(keys);
    List<N> out = new ArrayList<>(n);
    for (long k : keys) out.add(list.get((int) k));
    return out;
  }
}
