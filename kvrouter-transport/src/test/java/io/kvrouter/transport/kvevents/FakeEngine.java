package io.kvrouter.transport.kvevents;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.prefixcache.PrefixCache;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A mock engine for tests: a {@link PrefixCache} whose events are turned into the vLLM events an
 * engine publishes ({@code BlockStored} with the stored blocks' token ids, {@code BlockRemoved},
 * {@code AllBlocksCleared}), collected until {@link #drain()}.
 *
 * <p>The cache's block hashes are §2 sequence hashes over engine blocks, so they play the part of
 * vLLM's block hashes. The token ids of a store are the request's tokens for the newly stored
 * blocks: the cache always stores the trailing full blocks of the request being admitted.
 */
public final class FakeEngine implements Workload.Engine {
  private final int blockSize;
  private final String lora;
  private final String medium;
  private final PrefixCache cache;
  private final List<EngineEvent> pending = new ArrayList<>();
  private int[] admitting;

  /** An engine of {@code capacity} blocks of {@code blockSize} tokens, publishing medium GPU. */
  public FakeEngine(int blockSize, int capacity) {
    this(blockSize, capacity, null, "GPU");
  }

  public FakeEngine(int blockSize, int capacity, String lora, String medium) {
    this.blockSize = blockSize;
    this.lora = lora;
    this.medium = medium;
    this.cache =
        PrefixCache.builder(Worker.of(0), blockSize, capacity)
            .lora(lora)
            .listener(this::onEvent)
            .build();
  }

  private void onEvent(RouterEvent e) {
    switch (e.data()) {
      case CacheEvent.Stored s -> {
        int blocks = admitting.length / blockSize;
        int n = s.length();
        int[] tokens = Arrays.copyOfRange(admitting, (blocks - n) * blockSize, blocks * blockSize);
        pending.add(
            new EngineEvent.BlockStored(
                s.blockHashes().clone(),
                s.hasParent(),
                s.parentHash(),
                tokens,
                blockSize,
                null,
                medium,
                lora,
                null,
                null,
                null,
                null));
      }
      case CacheEvent.Removed r ->
          pending.add(new EngineEvent.BlockRemoved(r.blockHashes().clone(), medium, null, null));
      case CacheEvent.Cleared c -> pending.add(new EngineEvent.AllBlocksCleared());
    }
  }

  /** Admits a request (see {@link PrefixCache#admit}). */
  @Override
  public PrefixCache.Admission admit(long requestId, int[] tokens) {
    admitting = tokens;
    try {
      return cache.admit(requestId, tokens);
    } finally {
      admitting = null;
    }
  }

  @Override
  public boolean release(long requestId) {
    return cache.release(requestId);
  }

  @Override
  public int evict(int blocks) {
    return cache.evict(blocks);
  }

  @Override
  public void clear() {
    cache.clear();
  }

  /** How many leading engine blocks of {@code tokens} the engine holds. */
  public int lookup(int[] tokens) {
    return cache.lookup(tokens);
  }

  public int blockSize() {
    return blockSize;
  }

  public int cachedBlocks() {
    return cache.cachedBlocks();
  }

  /** The events published since the last call, oldest first. */
  public List<EngineEvent> drain() {
    List<EngineEvent> out = List.copyOf(pending);
    pending.clear();
    return out;
  }

  public PrefixCache cache() {
    return cache;
  }
}
