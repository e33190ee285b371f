package io.kvrouter.mockengine;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.KvCacheGroup;
import io.kvrouter.prefixcache.PrefixCache;
import io.kvrouter.transport.kvevents.EngineEvent;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.PriorityQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * The mock engine's scheduler in real time: continuous batching up to {@code --max-num-seqs}, a
 * FIFO waiting queue, a {@link PrefixCache} of {@code --num-gpu-blocks} blocks, a FIFO prefill lane
 * and per-token decode timers, all from {@link TimingModel} scaled by {@code --speedup}.
 *
 * <pre>
 * Implementation notes
 *
 * One platform thread (the engine thread) owns everything below; other threads only enqueue
 * commands (submit, abort, reset, dump) and read the volatile gauges in EngineMetrics. The
 * loop: run due timers, run queued commands, admit from the head of the waiting queue, hand the
 * step's KV events to the publisher as one batch, then wait for the next timer or command.
 *
 * A request (Job) is waiting, then running (admitted: PrefixCache.admit locked its cached
 * prefix, stored and published its new full prompt blocks), then done. Its prefill starts when
 * the prefill lane is free (prefillFreeAt) and lasts TimingModel.prefillNanos(uncached)/speedup;
 * its first token comes out when the prefill ends, token k at prefillEnd + k × decode. Timers
 * fire at planned times, so lateness of one does not shift the next. The last token releases
 * the blocks (they stay cached, evictable) and the next waiting request may be admitted. An
 * abort (client gone, stop string matched) frees the blocks at once and cancels the timers
 * (each timer checks job.done).
 *
 * As vLLM, a prompt whose blocks are all cached still computes its last token: the hit reported
 * (cached_tokens) is capped at whole blocks within prompt length − 1.
 *
 * A consumer's job with remoteBlocks (a disaggregated decode): admission stores the prompt's
 * blocks as any admission does (BlockStored for the new ones: vLLM caches received blocks once
 * their transfer is done), the blocks of remoteBlocks not cached here are "pulled" for
 * kvTransferMsPerBlock each (not on the prefill lane: NIXL reads while the engine runs), then
 * the prompt past the received blocks is computed on the prefill lane. cached_tokens reports the
 * local and the received blocks; the prefix-cache hit counters only the local ones.
 *
 * A host tier (--host-blocks, HostTier, docs/mock-engine.md): HostTier.tap sits between the
 * PrefixCache and onCacheEvent, copies each evicted device block to its LRU and emits host
 * events to onHostEvent, which turns them into medium-CPU engine events in the same step batch
 * (the CPU store before the GPU removal). tokensOf keeps each known block's token ids (put at its
 * device store, dropped when HostTier forgets the block) for those self-describing CPU stores.
 * At admission, the blocks after the device prefix that the host holds are loaded at the host's
 * transfer time each on the prefill lane, and count in cached_tokens (vLLM's num_cached_tokens
 * includes a connector's tokens); not for a consumer's pulled requests.
 *
 * A hybrid model (--kv-groups, docs/mock-engine.md "Hybrid models"): hybrid, a HybridKvCache of
 * --num-gpu-blocks pages, takes the PrefixCache's place for admission, release and the hit; the
 * end of a prefill (the first token) tells it to free what the decode no longer needs. Its
 * listener turns each group's stores and removals into vLLM's events with group_idx,
 * kv_cache_spec_kind and (sliding windows) kv_cache_spec_sliding_window, token ids from
 * `admitting` over the store's whole block range, as vLLM publishes them.
 *
 * LoRA (--max-loras K > 0, LoraSlots, docs/mock-engine.md "LoRA adapters"): a job naming an
 * adapter uses it at admission; when it was not resident it is loaded first, --lora-load-ms on
 * the prefill lane before the prefill (counted in the job's modelPrefill), evicting the least
 * recently used. The prefix cache is not
 * partitioned by adapter here (vLLM's is: the adapter is part of each block's hash).
 *
 * Events: PrefixCache's listener runs inside admit/clear on this thread; Stored events get the
 * prompt tokens of their blocks from `admitting` (the job being admitted). Block hashes on the
 * wire are the engine's own: a bijective 64-bit mix of the §2 sequence hash with a per-start
 * salt, so they are opaque to a router and change when the engine restarts (as vLLM's do unless
 * PYTHONHASHSEED is fixed), and Removed maps the same way.
 * </pre>
 */
final class EngineScheduler implements AutoCloseable {

  /** What the HTTP side hears about its request; called on the engine thread, must not block. */
  interface Listener {
    /** Admitted; {@code cachedTokens} of its prompt came from the prefix cache. */
    void admitted(int cachedTokens);

    /** Output token {@code index} (0-based) is out. */
    void token(int index);

    /** The last token is out and the blocks are released. */
    void finished();

    /** The engine stopped (died or closed) before the request finished. */
    void killed();
  }

  /** One request as the scheduler sees it. */
  static final class Job {
    final long id;
    final String requestId;
    final int[] prompt;
    final int maxTokens;
    final int stallAfter;

    /** Blocks a remote prefill engine computed for this request (do_remote_prefill); 0: none. */
    final int remoteBlocks;

    final Listener listener;
    final long arrival = System.nanoTime();
    // the LoRA adapter the request names, or null; set before submit (its hand-off publishes it)
    @Nullable String adapter;
    // engine thread only
    private boolean done;
    private boolean admitted;
    private long admittedAt;
    private long prefillStart;
    private long prefillEnd;
    private long firstTokenAt;
    private long lastTokenAt;
    private long modelPrefill;
    private int cachedTokens;
    private int hostTokens;
    private int emitted;
    private int pulledBlocks;

    Job(long id, String requestId, int[] prompt, int maxTokens, int stallAfter, Listener l) {
      this(id, requestId, prompt, maxTokens, stallAfter, 0, l);
    }

    Job(
        long id,
        String requestId,
        int[] prompt,
        int maxTokens,
        int stallAfter,
        int remoteBlocks,
        Listener l) {
      this.id = id;
      this.remoteBlocks = remoteBlocks;
      this.requestId = requestId;
      this.prompt = prompt;
      this.maxTokens = maxTokens;
      this.stallAfter = stallAfter;
      this.listener = l;
    }
  }

  private record Timer(long due, long seq, Runnable action) implements Comparable<Timer> {
    @Override
    public int compareTo(Timer o) {
      int c = Long.compare(due, o.due);
      return c != 0 ? c : Long.compare(seq, o.seq);
    }
  }

  private static final int RECENT = 1000;

  private final int blockSize;
  private final int maxNumSeqs;
  private final TimingModel timing;
  private final double speedup;
  private final KvEventPublisher publisher;
  private final EngineMetrics metrics;
  private final long salt;
  private final double transferNanosPerBlock;
  private final @Nullable LoraSlots loras; // null: LoRA off (--max-loras 0)
  private final long loraLoadNanos; // model time of an adapter load
  private final PrefixCache cache;
  private final @Nullable HybridKvCache hybrid; // null unless --kv-groups names a hybrid model
  private final @Nullable HostTier host; // null without --host-blocks
  // §2 sequence hash -> the block's token ids, for the host tier's self-describing events
  private final Long2ObjectOpenHashMap<int[]> tokensOf = new Long2ObjectOpenHashMap<>();
  private final LinkedBlockingQueue<Runnable> commands = new LinkedBlockingQueue<>();
  private final Thread thread;
  private volatile boolean running = true;

  // engine thread only
  private final ArrayDeque<Job> waiting = new ArrayDeque<>();
  private final LinkedHashSet<Job> active = new LinkedHashSet<>();
  private final PriorityQueue<Timer> timers = new PriorityQueue<>();
  private final List<EngineEvent> stepEvents = new ArrayList<>();
  private long timerSeq;
  private long prefillFreeAt;
  private long heldBlocks;
  private long evictedBlocks;
  private Job admitting;

  private final ArrayDeque<MockEngineServer.RequestTiming> recent = new ArrayDeque<>();

  EngineScheduler(MockEngineServer.Config c, KvEventPublisher publisher, EngineMetrics metrics) {
    this.blockSize = c.blockSize();
    this.maxNumSeqs = c.maxNumSeqs();
    this.timing = c.timing();
    this.speedup = c.speedup();
    this.publisher = publisher;
    this.metrics = metrics;
    this.salt = mix(c.seed() ^ System.nanoTime() ^ 0x6d6f636b656e67L);
    this.transferNanosPerBlock = c.kvTransferMsPerBlock() * 1e6;
    this.loras = c.maxLoras() > 0 ? new LoraSlots(c.maxLoras()) : null;
    this.loraLoadNanos = Math.round(c.loraLoadMs() * 1e6);
    Worker self = new Worker(0, 0);
    this.host =
        c.hostBlocks() > 0
            ? new HostTier(
                self,
                c.hostBlocks(),
                Math.round(c.hostMsPerBlock() * 1e6),
                this::onHostEvent,
                tokensOf::remove)
            : null;
    this.cache =
        PrefixCache.builder(self, c.blockSize(), c.numGpuBlocks())
            .listener(host == null ? this::onCacheEvent : host.tap(this::onCacheEvent))
            .removedEventPerBlock(true)
            .build();
    this.hybrid =
        c.kvGroups() == null
            ? null
            : new HybridKvCache(self, c.blockSize(), c.numGpuBlocks(), c.kvGroups(), groupEvents());
    this.thread = Thread.ofPlatform().daemon().name("mock-engine-scheduler").unstarted(this::loop);
  }

  void start() {
    thread.start();
  }

  /** The engine's wire hash of a §2 sequence hash: a bijection salted per start. */
  long engineHash(long seqHash) {
    return mix(seqHash ^ salt);
  }

  /** The engine's id in the kv_transfer_params it hands out (new at every start). */
  String engineId() {
    return "mock-" + Long.toHexString(salt);
  }

  /** The wire hashes of the full blocks of {@code prompt}, as this engine's events name them. */
  long[] engineBlockHashes(int[] prompt) {
    long[] seq = SequenceHasher.sequenceHashes(cache.hasher().localHashes(prompt));
    for (int i = 0; i < seq.length; i++) seq[i] = engineHash(seq[i]);
    return seq;
  }

  private long[] sequenceHashes(int[] prompt) {
    return SequenceHasher.sequenceHashes(cache.hasher().localHashes(prompt));
  }

  /** splitmix64's finaliser: a bijection on 64-bit values. */
  static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
    z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
    return z ^ (z >>> 31);
  }

  /** The resident LoRA adapters, or null when LoRA is off. */
  @Nullable LoraSlots loras() {
    return loras;
  }

  /** The model time of one adapter load, in real nanoseconds (scaled by the speedup). */
  long loraLoadRealNanos() {
    return real(loraLoadNanos);
  }

  /** Queues {@code j}; its listener hears the rest. */
  void submit(Job j) {
    command(
        () -> {
          waiting.add(j);
          metrics.waiting = waiting.size();
        });
  }

  /** Ends {@code j} now, freeing its blocks ({@code reason}: abort or stop). */
  void end(Job j, String reason) {
    command(() -> endNow(j, reason));
  }

  /** Drops the whole prefix cache if no request is in flight (vLLM refuses otherwise). */
  boolean resetPrefixCache() {
    return call(
        () -> {
          if (!active.isEmpty() || !waiting.isEmpty()) return false;
          if (hybrid != null) {
            hybrid.clear();
            stepEvents.add(new EngineEvent.AllBlocksCleared());
          }
          cache.clear();
          heldBlocks = 0;
          return true;
        });
  }

  /** The cache and queues, taken on the engine thread. */
  MockEngineServer.CacheDump dump() {
    return call(
        () -> {
          flushEvents(); // so that lastEventSeq covers every event behind this state
          long[] seq =
              hybrid == null
                  ? cache.blockHashes()
                  : hybrid.cachedHashes(hybrid.groups().mainGroup());
          Arrays.sort(seq); // signed order; re-sorted as unsigned strings below
          List<long[]> pairs = new ArrayList<>();
          for (long h : seq) pairs.add(new long[] {h, engineHash(h)});
          pairs.sort((a, b) -> Long.compareUnsigned(a[0], b[0]));
          List<String> ours = new ArrayList<>(pairs.size());
          List<String> theirs = new ArrayList<>(pairs.size());
          for (long[] p : pairs) {
            ours.add(Long.toUnsignedString(p[0]));
            theirs.add(Long.toUnsignedString(p[1]));
          }
          return new MockEngineServer.CacheDump(
              blockSize,
              cache.capacity(),
              List.copyOf(ours),
              List.copyOf(theirs),
              active.size(),
              waiting.size(),
              publisher == null ? -1 : publisher.lastQueuedSeq(),
              evictedBlocks);
        });
  }

  List<MockEngineServer.RequestTiming> recentTimings() {
    synchronized (recent) {
      return List.copyOf(recent);
    }
  }

  private void command(Runnable r) {
    if (!running) {
      throw new IllegalStateException("the mock engine has stopped");
    }
    commands.add(r);
  }

  private <T> T call(Supplier<T> s) {
    CompletableFuture<T> f = new CompletableFuture<>();
    command(
        () -> {
          try {
            f.complete(s.get());
          } catch (RuntimeException e) {
            f.completeExceptionally(e);
          }
        });
    try {
      return f.get(30, TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new IllegalStateException("mock engine scheduler did not answer: " + e, e);
    }
  }

  private void loop() {
    try {
      while (running) {
        long now = System.nanoTime();
        Timer t;
        while ((t = timers.peek()) != null && t.due - now <= 0) {
          timers.poll();
          t.action.run();
        }
        Runnable c;
        while ((c = commands.poll()) != null) c.run();
        admit();
        flushEvents();
        metrics.running = active.size();
        metrics.waiting = waiting.size();
        metrics.kvUsage = Math.min(1.0, (double) heldBlocks / cache.capacity());
        Timer next = timers.peek();
        long wait = next == null ? 50_000_000L : next.due - System.nanoTime();
        if (wait > 0) {
          c = commands.poll(wait, TimeUnit.NANOSECONDS);
          if (c != null) c.run();
        }
      }
    } catch (InterruptedException e) {
      // closed
    } finally {
      running = false;
      for (Job j : waiting) j.listener.killed();
      for (Job j : active) j.listener.killed();
      Runnable c;
      while ((c = commands.poll()) != null) {
        // answer nothing: callers time out or see running == false
      }
    }
  }

  private void at(long due, Runnable r) {
    timers.add(new Timer(due, timerSeq++, r));
  }

  private long real(long modelNanos) {
    return Math.round(modelNanos / speedup);
  }

  private void admit() {
    while (!waiting.isEmpty() && active.size() < maxNumSeqs) {
      Job j = waiting.peek();
      admitting = j;
      PrefixCache.Admission a;
      try {
        if (hybrid != null) {
          HybridKvCache.Admission h = hybrid.admit(j.id, j.prompt);
          a = new PrefixCache.Admission(h.admitted(), h.cachedBlocks(), 0, 0);
        } else {
          a = cache.admit(j.id, j.prompt);
        }
      } finally {
        admitting = null;
      }
      if (!a.admitted()) return; // the pool is full of locked blocks: wait for a release
      waiting.poll();
      active.add(j);
      evictedBlocks += a.evictedBlocks();
      long now = System.nanoTime();
      j.admitted = true;
      j.admittedAt = now;
      int maxHit = Math.max(0, j.prompt.length - 1) / blockSize;
      int hitBlocks = Math.min(a.cachedBlocks(), maxHit);
      int localHitTokens = hitBlocks * blockSize;
      long ready = now;
      if (j.remoteBlocks > 0) {
        // as vLLM's NixlConnector: only the remote blocks not cached here are pulled (without
        // holding the prefill lane); the rest of the prompt is computed here
        j.pulledBlocks = Math.max(0, j.remoteBlocks - a.cachedBlocks());
        ready = now + real(Math.round(j.pulledBlocks * transferNanosPerBlock));
        hitBlocks = Math.min(Math.max(a.cachedBlocks(), j.remoteBlocks), maxHit);
      }
      int hostBlocks = 0;
      if (host != null && j.remoteBlocks == 0) {
        // blocks past the device prefix that the host tier holds are loaded, not recomputed
        int fromHost = host.hits(sequenceHashes(j.prompt), a.cachedBlocks());
        hostBlocks = Math.max(0, Math.min(a.cachedBlocks() + fromHost, maxHit) - hitBlocks);
        hitBlocks += hostBlocks;
      }
      j.hostTokens = hostBlocks * blockSize;
      j.cachedTokens = hitBlocks * blockSize;
      heldBlocks += j.prompt.length / blockSize;
      // an adapter that is not resident is loaded first, on the prefill lane (LoraSlots): its
      // load counts in the request's model prefill
      final long loraLoad =
          loras != null && j.adapter != null && loras.use(j.adapter) ? loraLoadNanos : 0;
      j.modelPrefill =
          real(
              loraLoad
                  + timing.prefillNanos(j.prompt.length - j.cachedTokens)
                  + (host == null ? 0 : hostBlocks * host.transferNanos()));
      j.prefillStart = Math.max(ready, prefillFreeAt);
      j.prefillEnd = j.prefillStart + j.modelPrefill;
      prefillFreeAt = j.prefillEnd;
      metrics.prefixQueries.addAndGet(j.prompt.length);
      metrics.prefixHits.addAndGet(localHitTokens);
      metrics.pulledBlocks.addAndGet(j.pulledBlocks);
      metrics.hostLoadedBlocks.addAndGet(hostBlocks);
      metrics.promptTokens.addAndGet(j.prompt.length);
      metrics.queue.observe((now - j.arrival) / 1e9);
      j.listener.admitted(j.cachedTokens);
      at(j.prefillEnd, () -> emit(j, 0));
    }
  }

  private void emit(Job j, int k) {
    if (j.done) return;
    long now = System.nanoTime();
    if (k == 0) {
      if (hybrid != null) hybrid.prefillDone(j.id);
      j.firstTokenAt = now;
      metrics.ttft.observe((now - j.arrival) / 1e9);
      metrics.prefill.observe((now - j.prefillStart) / 1e9);
    } else {
      metrics.itl.observe((now - j.lastTokenAt) / 1e9);
    }
    j.lastTokenAt = now;
    j.emitted = k + 1;
    metrics.generationTokens.incrementAndGet();
    if (k + 1 >= j.maxTokens) {
      // recorded (timings, metrics, blocks released) before the handler hears of the last token,
      // which ends the response: a client that has its answer sees the request finished
      finish(j, null);
      j.listener.token(k);
      j.listener.finished();
      return;
    }
    j.listener.token(k);
    if (j.stallAfter > 0 && k + 1 >= j.stallAfter) return; // stalls until aborted or closed
    long decode = real(timing.decodeNanos(k + 2));
    at(j.prefillEnd + decode, () -> emit(j, k + 1));
  }

  private void endNow(Job j, String reason) {
    if (j.done) return;
    if (!j.admitted) {
      waiting.remove(j);
    }
    finish(j, reason);
  }

  /** Releases {@code j}'s blocks and records it; {@code reason} null: it ran to its length. */
  private void finish(Job j, String reason) {
    j.done = true;
    long now = System.nanoTime();
    if (j.admitted) {
      if (hybrid != null) hybrid.release(j.id);
      else cache.release(j.id);
      active.remove(j);
      heldBlocks -= j.prompt.length / blockSize;
      metrics.e2e.observe((now - j.arrival) / 1e9);
      if (j.firstTokenAt != 0) metrics.decode.observe((now - j.firstTokenAt) / 1e9);
    }
    String r = reason == null ? "length" : reason;
    switch (r) {
      case "stop" -> metrics.successStop.incrementAndGet();
      case "abort" -> metrics.successAbort.incrementAndGet();
      default -> metrics.successLength.incrementAndGet();
    }
    MockEngineServer.RequestTiming timing =
        new MockEngineServer.RequestTiming(
            j.requestId,
            j.prompt.length,
            j.cachedTokens,
            j.hostTokens,
            j.emitted,
            j.admitted ? j.admittedAt - j.arrival : now - j.arrival,
            j.firstTokenAt == 0 ? -1 : j.firstTokenAt - j.arrival,
            j.modelPrefill,
            j.admitted ? j.prefillStart - j.admittedAt : 0,
            r);
    synchronized (recent) {
      recent.addLast(timing);
      if (recent.size() > RECENT) recent.removeFirst();
    }
  }

  private void onCacheEvent(RouterEvent e) {
    switch (e.data()) {
      case CacheEvent.Stored s -> {
        int[] prompt = admitting.prompt;
        int full = prompt.length / blockSize;
        int n = s.length();
        int[] tokens = Arrays.copyOfRange(prompt, (full - n) * blockSize, full * blockSize);
        long[] hashes = new long[n];
        for (int i = 0; i < n; i++) {
          hashes[i] = engineHash(s.blockHashes()[i]);
          if (host != null) {
            tokensOf.put(
                s.blockHashes()[i], Arrays.copyOfRange(tokens, i * blockSize, (i + 1) * blockSize));
          }
        }
        stored(s, hashes, tokens, "GPU");
      }
      case CacheEvent.Removed r -> removed(r, "GPU");
      case CacheEvent.Cleared c -> stepEvents.add(new EngineEvent.AllBlocksCleared());
    }
  }

  /**
   * The hybrid cache's events as vLLM's: each group's stores with its group_idx, kind and window
   * and the token ids of the store's whole block range; one removal per evicted block.
   */
  private HybridKvCache.Listener groupEvents() {
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
        long[] wire = new long[hashes.length];
        for (int i = 0; i < wire.length; i++) wire[i] = engineHash(hashes[i]);
        int[] tokens =
            Arrays.copyOfRange(admitting.prompt, fromBlock * blockSize, toBlock * blockSize);
        stepEvents.add(
            new EngineEvent.BlockStored(
                wire,
                fromBlock > 0,
                fromBlock > 0 ? engineHash(seq[fromBlock - 1]) : 0L,
                tokens,
                blockSize,
                null,
                "GPU",
                null,
                null,
                group,
                vllmKind(kind),
                kind.kind() == KvCacheGroup.Kind.SLIDING_WINDOW ? kind.windowTokens() : null,
                null));
      }

      @Override
      public void removed(int group, long hash) {
        evictedBlocks++;
        stepEvents.add(
            new EngineEvent.BlockRemoved(new long[] {engineHash(hash)}, "GPU", group, null));
      }
    };
  }

  /** vLLM's kv_cache_spec_kind of a group. */
  static String vllmKind(KvCacheGroup g) {
    return switch (g.kind()) {
      case FULL -> "full_attention";
      case SLIDING_WINDOW -> "sliding_window";
      case STATE -> "mamba";
      case CHUNKED_LOCAL -> "chunked_local_attention";
    };
  }

  /** A BlockStored of {@code s}'s blocks (engine hashes, their tokens) on {@code medium}. */
  private void stored(CacheEvent.Stored s, long[] hashes, int[] tokens, String medium) {
    stepEvents.add(
        new EngineEvent.BlockStored(
            hashes,
            s.hasParent(),
            s.hasParent() ? engineHash(s.parentHash()) : 0L,
            tokens,
            blockSize,
            null,
            medium,
            null,
            null,
            null,
            null,
            null));
  }

  /** A BlockRemoved of {@code r}'s blocks (as engine hashes) on {@code medium}. */
  private void removed(CacheEvent.Removed r, String medium) {
    long[] hashes = new long[r.blockHashes().length];
    for (int i = 0; i < hashes.length; i++) hashes[i] = engineHash(r.blockHashes()[i]);
    stepEvents.add(new EngineEvent.BlockRemoved(hashes, medium, null, null));
  }

  /**
   * A host-tier event (HostTier, one block each), as vLLM's OffloadingConnector publishes it with
   * self-describing events: BlockStored with medium CPU, the block's token ids and its parent's
   * engine hash, under the same engine hash as the block's GPU events; BlockRemoved medium CPU.
   * Lands in the same step batch as the GPU events around it, in order.
   */
  private void onHostEvent(RouterEvent e) {
    switch (e.data()) {
      case CacheEvent.Stored s -> {
        long h = s.blockHashes()[0];
        stored(s, new long[] {engineHash(h)}, tokensOf.get(h), "CPU");
      }
      case CacheEvent.Removed r -> removed(r, "CPU");
      case CacheEvent.Cleared c -> {} // the host tier publishes no clears
    }
  }

  private void flushEvents() {
    if (stepEvents.isEmpty()) return;
    if (publisher != null) publisher.publish(List.copyOf(stepEvents));
    stepEvents.clear();
  }

  @Override
  public void close() {
    running = false;
    thread.interrupt();
    try {
      thread.join(10_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
