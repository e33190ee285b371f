package io.kvrouter.sim;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.KvCacheGroup;
import io.kvrouter.index.KvCacheGroups;
import io.kvrouter.mockengine.EventLoop;
import io.kvrouter.mockengine.HostTier;
import io.kvrouter.mockengine.HybridKvCache;
import io.kvrouter.mockengine.TimingModel;
import io.kvrouter.prefixcache.PrefixCache;
import java.util.ArrayDeque;
import java.util.Iterator;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * A simulated inference engine: one worker with one or more data-parallel ranks, each holding a
 * {@link PrefixCache} of a fixed number of KV blocks, a FIFO queue and the {@link TimingModel},
 * publishing the cache's KV events as a real engine does.
 *
 * <pre>
 * Implementation notes
 *
 * Everything runs on the EventLoop's thread, in simulated time. Per rank: waiting is the FIFO
 * queue of submitted requests not yet admitted; running counts admitted requests (prefilling or
 * decoding); prefillFreeAt is when the rank's prefill lane is next idle.
 *
 * Life of a request on a rank:
 *   submit     -> waiting (or rejected at once when its full blocks exceed the whole pool:
 *                 it could never be admitted and would block the queue forever)
 *   admit      -> when it is at the head, running < maxBatch and PrefixCache.admit succeeds:
 *                 the cache locks the cached prefix, evicts LRU blocks if short (Removed event),
 *                 stores the new full blocks (Stored event) and holds them. The hit is
 *                 cachedBlocks * blockSize tokens. Its prefill is queued on the prefill lane.
 *                 When admit fails (the pool is full of blocks locked by running requests) the
 *                 head waits, and the queue behind it, until a release (head-of-line FIFO).
 *   prefill end -> first token (listener.firstToken), decode starts; lane holds the admitted
 *                 requests whose prefill has not ended, in lane order (laneStart/laneEnd on
 *                 each request); a prefill end is an event that checks the request's laneGen,
 *                 so abort can void it and move the later prefills up (schedulePrefillEnd)
 *   decode end  -> PrefixCache.release (blocks stay cached, evictable), listener.finished,
 *                 then the queue is tried again.
 * Blocks are stored and published at admission, when the engine schedules the prefill that
 * computes them (vLLM v1 registers full blocks in its prefix cache when it schedules them), not
 * when the prefill ends.
 *
 * Load accounting per rank: inFlight (waiting + running) and its time integral, for the mean
 * load; prefillBusy, the nanoseconds the prefill lane worked, for utilisation.
 *
 * A hybrid model (groups != null, --kv-groups): each rank holds a HybridKvCache of gpuBlocks
 * pages instead of the PrefixCache, admits through it the same way, tells it when the prefill
 * ends (its sliding windows and states free what the decode no longer needs) and releases
 * through it. Its main group's stores and removals go to `events` as the PrefixCache's do, every
 * other group's to `groupEvents` (positions named by §2 sequence hashes, one removal per block).
 *
 * LoRA adapters (loras(...), simulate --lora-adapters): the engine holds at most maxLoras adapters
 * (AdapterSlots, an LRU shared by its ranks, as vLLM's --max-loras is per engine). A request
 * naming an adapter (SimRequest.adapter >= 0) that is not resident when it is admitted loads it
 * first: the load takes loadNanos on the rank's prefill lane before the prefill (vLLM loads an
 * adapter in the scheduler step that first needs it), evicting the least recently used adapter
 * when the slots are full. Not modelled: vLLM's bound of maxLoras distinct adapters per running
 * batch (an evicted adapter's running requests keep running here).
 * </pre>
 */
public final class MockEngine {

  /** What the fleet learns from an engine. */
  public interface Listener {
    /** The prefill of {@code r} ended; its first token is out. */
    void firstToken(SimRequest r);

    /** {@code r} finished and released its blocks. */
    void finished(SimRequest r);

    /** {@code r} can never be admitted (its blocks exceed the pool) and was dropped. */
    void rejected(SimRequest r);

    /** {@code r} is about to be admitted (or tried again) on {@code rank}. */
    default void admitting(SimRequest r, Worker rank) {}
  }

  /** Where a hybrid model's secondary KV cache groups' events go. */
  @FunctionalInterface
  public interface GroupEvents {
    /** An event of group {@code group}; {@code kind} is set on stores, null on removals. */
    void accept(int group, @Nullable KvCacheGroup kind, RouterEvent event);
  }

  /** One data-parallel rank: its cache, queue, prefill lane and load counters. */
  public final class Rank {
    final Worker worker;
    public final @Nullable PrefixCache cache; // null for a hybrid model
    public final @Nullable HybridKvCache hybrid; // null unless a hybrid model
    final @Nullable HostTier host; // null without a host tier
    private long eventId;
    private final ArrayDeque<SimRequest> waiting = new ArrayDeque<>();
    private final ArrayDeque<SimRequest> lane = new ArrayDeque<>(); // admitted, prefill not ended
    private int running;
    private long prefillFreeAt;
    private int inFlight;
    private long lastChange;
    private double loadIntegral; // request-nanoseconds
    private long prefillBusy;

    Rank(
        Worker worker,
        Consumer<RouterEvent> events,
        RemovedEvents removed,
        Consumer<RouterEvent> hostEvents) {
      this.worker = worker;
      this.host =
          hostBlocks > 0 ? new HostTier(worker, hostBlocks, hostTransferNanos, hostEvents) : null;
      if (groups == null) {
        this.cache =
            PrefixCache.builder(worker, blockSize, gpuBlocks)
                .listener(host == null ? events : host.tap(events))
                .removedEventPerBlock(removed.perBlock())
                .build();
        this.hybrid = null;
      } else {
        this.cache = null;
        this.hybrid =
            new HybridKvCache(worker, blockSize, gpuBlocks, groups, groupListener(events));
      }
    }

    /** The hybrid cache's events as router events: the main group's to events, others aside. */
    private HybridKvCache.Listener groupListener(Consumer<RouterEvent> events) {
      final int main = groups.mainGroup();
      return new HybridKvCache.Listener() {
        @Override
        public void stored(
            int group,
            KvCacheGroup kind,
            int[] positions,
            long[] hashes,
            long[] locals,
            long[] seq,
            int fromBlock,
            int toBlock) {
          if (group == main) {
            events.accept(
                new RouterEvent(
                    worker,
                    eventId++,
                    fromBlock == 0
                        ? CacheEvent.storedAtRoot(hashes, locals)
                        : CacheEvent.stored(seq[fromBlock - 1], hashes, locals)));
          } else {
            groupEvents.accept(
                group,
                kind,
                new RouterEvent(worker, eventId++, CacheEvent.storedAtRoot(hashes, locals)));
          }
        }

        @Override
        public void removed(int group, long hash) {
          RouterEvent e = new RouterEvent(worker, eventId++, CacheEvent.removed(hash));
          if (group == main) events.accept(e);
          else groupEvents.accept(group, null, e);
        }
      };
    }

    /** Requests waiting or running on this rank now. */
    public int inFlight() {
      return inFlight;
    }

    /** Time integral of {@link #inFlight()} up to {@code now}, in request-nanoseconds. */
    public double loadIntegral(long now) {
      return loadIntegral + (double) inFlight * (now - lastChange);
    }

    /** Nanoseconds the prefill lane has worked (including prefills scheduled ahead of now). */
    public long prefillBusyNanos() {
      return prefillBusy;
    }

    private void changeInFlight(int delta) {
      final long now = loop.now();
      loadIntegral += (double) inFlight * (now - lastChange);
      lastChange = now;
      inFlight += delta;
    }

    private void submit(SimRequest r) {
      int pages =
          hybrid != null
              ? hybrid.pagesNeeded(r.trace.inputLength())
              : r.trace.inputLength() / blockSize;
      if (pages > gpuBlocks) {
        r.rejected = true;
        listener.rejected(r);
        return;
      }
      changeInFlight(1);
      waiting.add(r);
      tryAdmit();
    }

    private void tryAdmit() {
      while (!waiting.isEmpty() && running < timing.maxBatch()) {
        final SimRequest r = waiting.peek();
        listener.admitting(r, worker);
        final boolean admitted;
        final int cachedBlocks;
        if (hybrid != null) {
          HybridKvCache.Admission a = hybrid.admit(r.id, r.tokens());
          admitted = a.admitted();
          cachedBlocks = a.cachedBlocks();
        } else {
          PrefixCache.Admission a = cache.admit(r.id, r.tokens());
          admitted = a.admitted();
          cachedBlocks = a.cachedBlocks();
          r.storedBlocks = a.newBlocks() > 0;
        }
        if (!admitted) {
          return; // the pool is full of locked blocks: wait for a release
        }
        waiting.poll();
        running++;
        final long now = loop.now();
        r.admitted = now;
        // a LoRA adapter that is not resident is loaded first, on the prefill lane
        final long load = slots == null || r.adapter < 0 ? 0 : slots.use(r.adapter);
        // blocks past the device prefix that the host tier holds are loaded, not recomputed
        final int fromHost = host == null ? 0 : host.hits(hashes(r), cachedBlocks);
        r.cachedTokens = (cachedBlocks + fromHost) * blockSize;
        r.hostTokens = fromHost * blockSize;
        final long start = Math.max(now, prefillFreeAt);
        final long end =
            start
                + load
                + timing.prefillNanos(r.trace.inputLength() - r.cachedTokens)
                + fromHost * (host == null ? 0 : host.transferNanos());
        prefillBusy += end - start;
        prefillFreeAt = end;
        r.laneStart = start;
        r.laneEnd = end;
        lane.addLast(r);
        schedulePrefillEnd(r);
      }
    }

    /** The prefill end of {@code r} at r.laneEnd; an earlier schedule of it is void from now. */
    private void schedulePrefillEnd(SimRequest r) {
      final int gen = ++r.laneGen;
      loop.at(
          r.laneEnd,
          () -> {
            if (r.laneGen == gen) prefillDone(r);
          });
    }

    /**
     * Aborts {@code r} on this rank before its first token (see {@link MockEngine#abort}); -1 when
     * it is not waiting or prefilling here.
     */
    private long abort(SimRequest r) {
      if (r.firstToken >= 0) return -1;
      if (waiting.remove(r)) {
        changeInFlight(-1);
        return 0;
      }
      if (!lane.contains(r)) return -1;
      if (hybrid != null) {
        throw new UnsupportedOperationException("aborting a request on a hybrid model's rank");
      }
      final long now = loop.now();
      final long shift = r.laneEnd - Math.max(now, r.laneStart);
      final long uncached = Math.max(0, r.trace.inputLength() - r.cachedTokens);
      final long length = r.laneEnd - r.laneStart;
      final long done = Math.max(0, now - r.laneStart);
      final long wasted = length <= 0 ? 0 : Math.round(uncached * (done / (double) length));
      r.laneGen++; // its prefill end is void
      boolean after = false;
      for (Iterator<SimRequest> it = lane.iterator(); it.hasNext(); ) {
        SimRequest x = it.next();
        if (x == r) {
          it.remove();
          after = true;
        } else if (after && shift > 0) {
          // the lane's later prefills move up by what r would still have taken
          x.laneStart -= shift;
          x.laneEnd -= shift;
          schedulePrefillEnd(x);
        }
      }
      prefillFreeAt -= shift;
      prefillBusy -= shift;
      cache.abort(r.id, r.storedBlocks);
      running--;
      changeInFlight(-1);
      r.admitted = -1;
      r.cachedTokens = 0;
      r.hostTokens = 0;
      r.storedBlocks = false;
      tryAdmit();
      return wasted;
    }

    private long[] hashes(SimRequest r) {
      return SequenceHasher.sequenceHashes(cache.hasher().localHashes(r.tokens()));
    }

    private void prefillDone(SimRequest r) {
      lane.remove(r);
      if (hybrid != null) hybrid.prefillDone(r.id);
      r.firstToken = loop.now();
      listener.firstToken(r);
      loop.after(timing.decodeNanos(r.trace.outputLength()), () -> finish(r));
    }

    private void finish(SimRequest r) {
      r.finished = loop.now();
      if (hybrid != null) hybrid.release(r.id);
      else cache.release(r.id);
      running--;
      changeInFlight(-1);
      listener.finished(r);
      tryAdmit();
    }
  }

  private final int blockSize;
  private final int gpuBlocks;
  private final TimingModel timing;
  private final EventLoop loop;
  private final Listener listener;
  private final Rank[] ranks;
  private final int hostBlocks;
  private final long hostTransferNanos;
  private final @Nullable KvCacheGroups groups; // null: one full-attention group
  private final GroupEvents groupEvents;
  private @Nullable AdapterSlots slots; // null: no LoRA adapters modelled

  /** The engine's resident LoRA adapters, an LRU of at most maxLoras, and its loads. */
  private static final class AdapterSlots {
    final int[] lru; // adapter ids, least recently used first, [0, size)
    int size;
    final long loadNanos;
    long loads;

    AdapterSlots(int maxLoras, long loadNanos) {
      this.lru = new int[maxLoras];
      this.loadNanos = loadNanos;
    }

    /** Uses {@code adapter}: 0 when resident, else loads it (evicting the LRU) and its time. */
    long use(int adapter) {
      int at = -1;
      for (int i = 0; i < size; i++) {
        if (lru[i] == adapter) {
          at = i;
          break;
        }
      }
      if (at >= 0) {
        System.arraycopy(lru, at + 1, lru, at, size - at - 1);
        lru[size - 1] = adapter;
        return 0;
      }
      loads++;
      if (size == lru.length) {
        System.arraycopy(lru, 1, lru, 0, size - 1);
        size--;
      }
      lru[size++] = adapter;
      return loadNanos;
    }
  }

  /**
   * An engine for worker {@code workerId} with ranks {@code 0..dpSize-1}, each caching up to {@code
   * gpuBlocks} blocks of {@code blockSize} tokens; every KV event goes to {@code events} at the
   * simulated time it happens, evictions shaped as {@code removed} says.
   */
  public MockEngine(
      long workerId,
      int dpSize,
      int blockSize,
      int gpuBlocks,
      TimingModel timing,
      EventLoop loop,
      RemovedEvents removed,
      Consumer<RouterEvent> events,
      Listener listener) {
    this(
        workerId, dpSize, blockSize, gpuBlocks, timing, loop, removed, events, listener, 0, 0,
        e -> {});
  }

  /**
   * Like the other constructor, each rank with a host tier of {@code hostBlocks} blocks (0: none)
   * that receives the blocks the device evicts and serves hits at {@code hostTransferNanos} per
   * block; its events go to {@code hostEvents}.
   */
  public MockEngine(
      long workerId,
      int dpSize,
      int blockSize,
      int gpuBlocks,
      TimingModel timing,
      EventLoop loop,
      RemovedEvents removed,
      Consumer<RouterEvent> events,
      Listener listener,
      int hostBlocks,
      long hostTransferNanos,
      Consumer<RouterEvent> hostEvents) {
    this(
        workerId,
        dpSize,
        blockSize,
        gpuBlocks,
        timing,
        loop,
        removed,
        events,
        listener,
        hostBlocks,
        hostTransferNanos,
        hostEvents,
        null,
        (g, k, e) -> {});
  }

  /**
   * Like the other constructors; with {@code groups} (a hybrid model, or null for one group) each
   * rank is a {@link HybridKvCache} of {@code gpuBlocks} pages whose main group's events go to
   * {@code events} and the other groups' to {@code groupEvents}.
   */
  public MockEngine(
      long workerId,
      int dpSize,
      int blockSize,
      int gpuBlocks,
      TimingModel timing,
      EventLoop loop,
      RemovedEvents removed,
      Consumer<RouterEvent> events,
      Listener listener,
      int hostBlocks,
      long hostTransferNanos,
      Consumer<RouterEvent> hostEvents,
      KvCacheGroups groups,
      GroupEvents groupEvents) {
    if (groups != null && hostBlocks > 0) {
      throw new IllegalArgumentException("a hybrid model's ranks have no host tier here");
    }
    this.groups = groups != null && groups.isHybrid() ? groups : null;
    this.groupEvents = groupEvents;
    this.hostBlocks = hostBlocks;
    this.hostTransferNanos = hostTransferNanos;
    this.blockSize = blockSize;
    this.gpuBlocks = gpuBlocks;
    this.timing = timing;
    this.loop = loop;
    this.listener = listener;
    this.ranks = new Rank[dpSize];
    for (int i = 0; i < dpSize; i++) {
      ranks[i] = new Rank(new Worker(workerId, i), events, removed, hostEvents);
    }
  }

  /**
   * Models vLLM's {@code --enable-lora --max-loras maxLoras}: requests that name an adapter load it
   * when it is not resident, taking {@code loadNanos} (see the class comment).
   *
   * @throws IllegalArgumentException when {@code maxLoras < 1} or {@code loadNanos < 0}
   */
  public void loras(int maxLoras, long loadNanos) {
    if (maxLoras < 1) throw new IllegalArgumentException("max loras must be >= 1, got " + maxLoras);
    if (loadNanos < 0) {
      throw new IllegalArgumentException("adapter load time must be >= 0, got " + loadNanos);
    }
    slots = new AdapterSlots(maxLoras, loadNanos);
  }

  /** Adapters this engine loaded so far (0 without {@link #loras}). */
  public long adapterLoads() {
    return slots == null ? 0 : slots.loads;
  }

  /** The rank {@code dpRank}. */
  public Rank rank(int dpRank) {
    return ranks[dpRank];
  }

  /** Number of data-parallel ranks. */
  public int dpSize() {
    return ranks.length;
  }

  /**
   * Aborts {@code r} on rank {@code dpRank} before its first token, as an engine aborts a request
   * whose client went away (the gateway's eviction of low-priority work): a request still waiting
   * leaves the queue; a prefilling one leaves its batch slot, its blocks are released and those it
   * stored that nothing else uses are evicted (PrefixCache.abort: its prefill is thrown away), and
   * the rank's prefill lane moves every later prefill up by what its prefill would still have
   * taken. No listener call is made for it; the rank then admits what waits.
   *
   * @return the prefill tokens it had computed (its uncached tokens times the part of its prefill
   *     time already spent), now wasted; -1 when {@code r} is not waiting or prefilling there
   */
  public long abort(SimRequest r, int dpRank) {
    return ranks[dpRank].abort(r);
  }

  /** Hands {@code r} to rank {@code dpRank} now (simulated time). */
  public void submit(SimRequest r, int dpRank) {
    ranks[dpRank].submit(r);
  }
}
