package io.kvrouter.prefixcache;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import it.unimi.dsi.fastutil.longs.Long2IntOpenHashMap;
import it.unimi.dsi.fastutil.longs.LongArrayList;
import java.util.ArrayList;
import java.util.Objects;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * One engine's block-granular prefix cache: a {@link RadixTree} whose granule is the block size and
 * whose values are block ids from a fixed pool, publishing the {@code Stored}, {@code Removed} and
 * {@code Cleared} events an engine publishes, so that a router index fed with them holds exactly
 * what this cache holds (DESIGN.md §3, §5).
 *
 * <p>Not thread-safe: one engine thread calls it. The listener runs on that thread, inside the call
 * that caused the event, after the cache has reached its new state.
 *
 * <pre>
 * Implementation notes
 *
 * Data layout. Block ids are 0..capacity-1. freeBlocks is a stack of the unused ids
 * (freeTop of them); every other id is a value in the tree, exactly once. seqHash[id] is the
 * engine's block hash of a stored block (its §2 sequence hash: it names the whole prefix up to
 * and including the block), written when the block is stored and read when it is evicted, so a
 * Removed event names exactly the freed blocks without walking the tree. boxed[id] is the
 * preallocated Integer for id, so handing ids to the generic tree does not allocate.
 * requests maps an admitted request id to the one tree node it locks (the deepest node of its
 * cached prompt, or ROOT when nothing is cached; locking ROOT is a no-op).
 *
 * Admission. admit first walks the tree read-only (RadixTree.peek) to learn the cached blocks c
 * and how many of them are unlocked. The request needs nb - c new blocks; the pool can supply
 * freeTop plus every unlocked block not on the request's own path (repeated leaf eviction frees
 * every unlocked node eventually, because a node's subtree is unlocked whenever the node is).
 * If that is not enough, admit returns a rejection having changed nothing (no stamp, no split,
 * no event). Otherwise: matchPrefix (stamps, may split) and lock the matched path; evict what is
 * missing (one Removed event, or with removedEventPerBlock one per block, each leaf deepest
 * first); pop ids, insert the new blocks as a leaf under the path, move the lock to that leaf;
 * publish one Stored event whose parent is the last cached block's sequence hash (or the root). Only local hashes of the new blocks are computed; the chain
 * continues from seqHash of the last cached block.
 *
 * Invariants: freeTop + tree.size() == capacity; the ids in the tree and on the free stack are
 * disjoint; the mirror of all published events holds exactly the sequence hashes of the tree's
 * values (the property PrefixCacheConsistencyTest checks).
 * </pre>
 */
public final class PrefixCache {

  /**
   * The outcome of {@link #admit}: whether the request got its blocks, how many of its full blocks
   * were already cached, how many were newly stored, and how many blocks were evicted to make room.
   * A rejection has {@code newBlocks == evictedBlocks == 0} and changed nothing; its {@code
   * cachedBlocks} is what {@link #lookup} reports.
   */
  public record Admission(boolean admitted, int cachedBlocks, int newBlocks, int evictedBlocks) {
    static Admission rejected(int cachedBlocks) {
      return new Admission(false, cachedBlocks, 0, 0);
    }
  }

  /** Builds a {@link PrefixCache}; the listener defaults to one that drops every event. */
  public static final class Builder {
    private final Worker worker;
    private final int blockSize;
    private final int capacity;
    private @Nullable String lora;
    private @Nullable String namespace;
    private Consumer<RouterEvent> listener = e -> {};
    private boolean removedPerBlock;

    private Builder(Worker worker, int blockSize, int capacity) {
      this.worker = worker;
      this.blockSize = blockSize;
      this.capacity = capacity;
    }

    /** Salts every block hash with a LoRA adapter name ({@code null} or empty: none). */
    public Builder lora(@Nullable String loraName) {
      this.lora = loraName;
      return this;
    }

    /** Salts every block hash with a cache namespace ({@code null} or empty: none). */
    public Builder namespace(@Nullable String namespace) {
      this.namespace = namespace;
      return this;
    }

    /** Where events go. */
    public Builder listener(Consumer<RouterEvent> listener) {
      this.listener = Objects.requireNonNull(listener, "listener");
      return this;
    }

    /**
     * With {@code true}, every evicted block gets a {@code Removed} event of its own, as vLLM
     * publishes them (one block per {@code BlockRemoved}, a freed request's blocks evicted from its
     * tail): leaf by leaf in the order they are evicted, each leaf's deepest block first. A leaf's
     * events are published once the whole leaf is gone (and before the next leaf goes), so a
     * listener that looks at the cache during them sees that leaf's blocks already freed. Default
     * {@code false}: one {@code Removed} event per eviction, naming all its blocks, each evicted
     * leaf's blocks from the top.
     */
    public Builder removedEventPerBlock(boolean perBlock) {
      this.removedPerBlock = perBlock;
      return this;
    }

    /** The cache. */
    public PrefixCache build() {
      return new PrefixCache(
          worker, blockSize, capacity, lora, namespace, listener, removedPerBlock);
    }
  }

  private static final Integer CACHED = -1;

  private final Worker worker;
  private final int blockSize;
  private final int capacity;
  private final BlockHasher hasher;
  private final Consumer<RouterEvent> listener;
  private final boolean removedPerBlock;

  private final int[] freeBlocks;
  private int freeTop;
  private final long[] seqHash;
  private final Integer[] boxed;
  private final Long2IntOpenHashMap requests = new Long2IntOpenHashMap();

  private RadixTree<Integer> tree;
  private long lastEventId;

  private final LongArrayList removedScratch = new LongArrayList();
  private final ArrayList<Integer> valuesScratch = new ArrayList<>();
  private final Consumer<Integer> onEvict = this::freeBlock;

  /**
   * A cache of {@code capacity} blocks of {@code blockSize} tokens for {@code worker}, without
   * salt, publishing to {@code listener}.
   *
   * @throws IllegalArgumentException if {@code blockSize < 1} or {@code capacity < 1}
   */
  public PrefixCache(Worker worker, int blockSize, int capacity, Consumer<RouterEvent> listener) {
    this(worker, blockSize, capacity, null, null, listener, false);
  }

  private PrefixCache(
      Worker worker,
      int blockSize,
      int capacity,
      @Nullable String lora,
      @Nullable String namespace,
      Consumer<RouterEvent> listener,
      boolean removedPerBlock) {
    this.worker = Objects.requireNonNull(worker, "worker");
    this.listener = Objects.requireNonNull(listener, "listener");
    this.removedPerBlock = removedPerBlock;
    if (capacity < 1) {
      throw new IllegalArgumentException("capacity must be >= 1 block, got " + capacity);
    }
    this.hasher = BlockHasher.of(blockSize).withLora(lora).withNamespace(namespace);
    this.blockSize = blockSize;
    this.capacity = capacity;
    this.freeBlocks = new int[capacity];
    this.seqHash = new long[capacity];
    this.boxed = new Integer[capacity];
    for (int i = 0; i < capacity; i++) {
      boxed[i] = i;
    }
    requests.defaultReturnValue(-1);
    reset();
  }

  /** A builder for a cache of {@code capacity} blocks of {@code blockSize} tokens. */
  public static Builder builder(Worker worker, int blockSize, int capacity) {
    return new Builder(worker, blockSize, capacity);
  }

  /** The worker rank whose cache this is; every event names it. */
  public Worker worker() {
    return worker;
  }

  /** Tokens per block. */
  public int blockSize() {
    return blockSize;
  }

  /** Blocks in the pool. */
  public int capacity() {
    return capacity;
  }

  /** The hasher that names this cache's blocks (block size and salt). */
  public BlockHasher hasher() {
    return hasher;
  }

  /** Blocks not holding any cached prefix. */
  public int freeBlocks() {
    return freeTop;
  }

  /** Blocks holding a cached prefix ({@code capacity() - freeBlocks()}). */
  public int cachedBlocks() {
    return tree.size();
  }

  /** Requests admitted and not yet released. */
  public int activeRequests() {
    return requests.size();
  }

  /** The id of the last event published, 0 before the first. */
  public long lastEventId() {
    return lastEventId;
  }

  /**
   * The engine block hash (DESIGN.md §2 sequence hash, as published in {@code Stored}) of every
   * cached block, in no particular order: what a router index fed with this cache's events must
   * hold for {@link #worker()}. Read-only; O(capacity).
   */
  public long[] blockHashes() {
    final boolean[] free = new boolean[capacity];
    for (int i = 0; i < freeTop; i++) {
      free[freeBlocks[i]] = true;
    }
    final long[] out = new long[capacity - freeTop];
    int n = 0;
    for (int id = 0; id < capacity; id++) {
      if (!free[id]) {
        out[n++] = seqHash[id];
      }
    }
    return out;
  }

  /**
   * How many leading full blocks of {@code tokens} this cache holds. Read-only: it neither
   * refreshes LRU stamps nor splits edges.
   */
  public int lookup(int[] tokens) {
    Objects.requireNonNull(tokens, "tokens");
    return (int) (tree.peek(tokens, tokens.length) >>> 32) / blockSize;
  }

  /**
   * Admits a request: locks its cached prefix, stores its remaining full blocks (a trailing partial
   * block is not cached), evicting least recently used unlocked blocks when the pool is short, and
   * holds all of them until {@link #release}. Publishes {@code Removed} if it evicted (one event,
   * or one per block: {@link Builder#removedEventPerBlock}) and one {@code Stored} event if it
   * stored. When the pool cannot hold the request even after evicting every unlocked block, returns
   * a rejection and changes nothing.
   *
   * @throws IllegalArgumentException if {@code requestId} is already admitted
   */
  public Admission admit(long requestId, int[] tokens) {
    Objects.requireNonNull(tokens, "tokens");
    if (requests.containsKey(requestId)) {
      throw new IllegalArgumentException("request " + requestId + " is already admitted");
    }
    final int bs = blockSize;
    final int blocks = tokens.length / bs;
    final int keyLength = blocks * bs;
    final long peek = tree.peek(tokens, keyLength);
    final int cached = (int) (peek >>> 32) / bs;
    final int unlockedOnPath = (int) peek;
    final int needed = blocks - cached;
    final int evictable = tree.evictableValues() - unlockedOnPath;
    if (needed > freeTop + evictable) {
      return Admission.rejected(cached);
    }

    // the full blocks, tokens[0..keyLength): a trailing partial block is not cached
    final RadixTree.Match match = tree.matchPrefix(tokens, keyLength);
    final int[] path = match.path();
    final int last = path.length == 0 ? RadixTree.ROOT : path[path.length - 1];
    tree.lock(last);
    int evicted = 0;
    if (needed > freeTop) {
      evicted = evictAndPublish(needed - freeTop);
    }
    if (needed == 0) {
      requests.put(requestId, last);
      return new Admission(true, cached, 0, evicted);
    }

    final long[] local = hasher.localHashes(tokens, cached * bs, keyLength);
    final long[] seq = new long[needed];
    final long parent = cached == 0 ? 0L : seqHash[tree.lastValue(last)];
    final ArrayList<Integer> values = valuesScratch;
    values.clear();
    for (int i = 0; i < cached; i++) {
      values.add(CACHED);
    }
    long prev = parent;
    for (int i = 0; i < needed; i++) {
      prev = cached + i == 0 ? local[0] : SequenceHasher.next(prev, local[i]);
      seq[i] = prev;
      final int id = freeBlocks[--freeTop];
      seqHash[id] = prev;
      values.add(boxed[id]);
    }
    final RadixTree.Insert<Integer> ins = tree.insert(tokens, keyLength, values);
    values.clear();
    if (ins.handedBack().size() != cached) {
      throw new IllegalStateException(
          "cache walked " + cached + " blocks but insert found " + ins.handedBack().size());
    }
    tree.lock(ins.node());
    tree.unlock(last);
    requests.put(requestId, ins.node());
    publish(
        cached == 0 ? CacheEvent.storedAtRoot(seq, local) : CacheEvent.stored(parent, seq, local));
    return new Admission(true, cached, needed, evicted);
  }

  /**
   * Releases a request's hold on its blocks; they stay cached and become evictable once no other
   * request holds them.
   *
   * @return whether {@code requestId} was admitted (and not dropped by {@link #clear})
   */
  public boolean release(long requestId) {
    final int node = requests.remove(requestId);
    if (node < 0) {
      return false;
    }
    tree.unlock(node);
    return true;
  }

  /**
   * Takes back a request whose prefill was abandoned before it produced anything (an engine's abort
   * of a preempted request): releases its hold like {@link #release}, and when {@code dropStored}
   * (the caller passes true only when its {@link Admission} stored new blocks), evicts the blocks
   * it stored that nothing else uses, so no block whose prefill never ran stays cached: the deepest
   * node it held, when that is now an unlocked leaf (a later request that extended or locked the
   * blocks keeps them). Publishes {@code Removed} for what it evicted.
   *
   * @return the number of blocks evicted; -1 when {@code requestId} was not admitted
   */
  public int abort(long requestId, boolean dropStored) {
    final int node = requests.remove(requestId);
    if (node < 0) {
      return -1;
    }
    tree.unlock(node);
    if (!dropStored || node == RadixTree.ROOT) {
      return 0;
    }
    final LongArrayList removed = removedScratch;
    removed.clear();
    final int freed = tree.evictLeaf(node, onEvict);
    if (removed.isEmpty()) {
      return freed;
    }
    if (removedPerBlock) {
      final long[] gone = removed.toLongArray();
      for (int i = gone.length - 1; i >= 0; i--) publish(CacheEvent.removed(gone[i]));
    } else {
      publish(CacheEvent.removed(removed.toLongArray()));
    }
    return freed;
  }

  /**
   * Evicts least recently used unlocked blocks, whole leaves at a time, until at least {@code
   * blocks} are free again or nothing unlocked is left, and publishes {@code Removed} (one event
   * naming exactly the evicted blocks, or one per block: {@link Builder#removedEventPerBlock}).
   *
   * @return the number of blocks evicted
   */
  public int evict(int blocks) {
    return evictAndPublish(blocks);
  }

  /**
   * Drops every cached block and every admitted request (their later {@link #release} returns
   * false) and publishes {@code Cleared}.
   */
  public void clear() {
    reset();
    requests.clear();
    publish(CacheEvent.cleared());
  }

  /** Checks the pool accounting and the tree's invariants (test support). */
  void checkInvariants() {
    tree.checkInvariants();
    if (freeTop + tree.size() != capacity) {
      throw new IllegalStateException(
          freeTop + " free + " + tree.size() + " cached blocks != capacity " + capacity);
    }
    boolean[] seen = new boolean[capacity];
    for (int i = 0; i < freeTop; i++) {
      if (seen[freeBlocks[i]]) {
        throw new IllegalStateException("block " + freeBlocks[i] + " is free twice");
      }
      seen[freeBlocks[i]] = true;
    }
  }

  private void reset() {
    tree = new RadixTree<>(blockSize);
    for (int i = 0; i < capacity; i++) {
      freeBlocks[i] = capacity - 1 - i; // pop order 0, 1, 2, ...
    }
    freeTop = capacity;
  }

  private int evictAndPublish(int blocks) {
    final LongArrayList removed = removedScratch;
    removed.clear();
    if (removedPerBlock) {
      int freed = 0;
      while (freed < blocks) {
        final int from = removed.size();
        final int leaf = tree.evict(1, onEvict); // one whole leaf, its blocks in label order
        if (leaf == 0) break;
        freed += leaf;
        // copied first: a listener may call back into this cache, which reuses removedScratch
        final long[] gone = new long[removed.size() - from];
        removed.getElements(from, gone, 0, gone.length);
        for (int i = gone.length - 1; i >= 0; i--) publish(CacheEvent.removed(gone[i]));
      }
      return freed;
    }
    final int freed = tree.evict(blocks, onEvict);
    if (!removed.isEmpty()) {
      publish(CacheEvent.removed(removed.toLongArray()));
    }
    return freed;
  }

  private void freeBlock(Integer id) {
    final int b = id;
    removedScratch.add(seqHash[b]);
    freeBlocks[freeTop++] = b;
  }

  private void publish(CacheEvent data) {
    listener.accept(new RouterEvent(worker, ++lastEventId, data));
  }

  @Override
  public String toString() {
    return "PrefixCache[worker="
        + worker
        + ", blockSize="
        + blockSize
        + ", capacity="
        + capacity
        + ", cached="
        + tree.size()
        + ", active="
        + requests.size()
        + "]";
  }
}
