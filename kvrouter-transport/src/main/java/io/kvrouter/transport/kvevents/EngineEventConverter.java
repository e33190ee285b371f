package io.kvrouter.transport.kvevents;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Turns the decoded events of one engine publisher into router events for one worker id, hashing
 * every stored block with the router's own {@link BlockHasher} (DESIGN.md §2, §3).
 *
 * <ul>
 *   <li>The engine's block hash becomes the block's sequence hash; the local hash is recomputed
 *       from {@code token_ids} with the router's block size, salted with the event's LoRA name (or,
 *       lacking one, the decimal {@code lora_id}) and cache salt (namespace).
 *   <li>An engine block of {@code k} router blocks ({@code engineBlockSize = k * routerBlockSize})
 *       becomes {@code k} router blocks: the engine hash names the last one; the others get §2
 *       chain hashes continuing from the parent ({@code next(previous, local)}). The converter
 *       remembers them, so a later {@code BlockRemoved} of the engine hash removes all {@code k}.
 *   <li>Only engine blocks whose tokens are all present are indexed (a partial block never is).
 *   <li>{@code medium} selects the {@link StorageTier}; {@code AllBlocksCleared} clears the device
 *       tier of the batch's rank (vLLM's offloaded copies survive its prefix-cache reset);
 *       secondary KV cache groups of hybrid models are ignored.
 *   <li>An off-device store without token ids (vLLM's placeholder offload events) is counted and
 *       left out: without tokens the router cannot hash its blocks. Off-device stores and removals
 *       are reference-counted per hash, as an offloading engine announces a block once per chunk
 *       that holds it.
 *   <li>A batch that names a block as its own ancestor (a stored hash equal to its parent or
 *       repeated within one store) is dropped whole.
 * </ul>
 *
 * <p>Not thread-safe: one ingestion thread owns a converter.
 */
public final class EngineEventConverter {
  /*
   * Implementation notes
   *
   * State is kept per (dp rank, tier) in a RankState, created on the first event of that pair:
   *   subBlocks   engine hash -> the k-1 derived hashes of its leading router blocks, in chain
   *               order (only when k > 1); written by a store, consumed by a removal.
   *   subBlockRefs derived hash -> how many stored engine blocks lead with it. Sibling engine
   *               blocks whose first i*R tokens agree share their first i derived blocks (same
   *               parent, same local hashes, so the same §2 hashes); a removal names a derived
   *               block only when its count drops to 0, else the siblings would lose an ancestor.
   *   saltByHash  engine hash -> cache salt, only for salted blocks, so a continuation store
   *               (which carries the salt only in its first request's block 0, as vLLM does)
   *               hashes with the salt of its parent chain.
   *   tierRefs    off-device tiers only: engine hash -> how many stores announced it and no
   *               removal took back (offloading engines announce a block once per chunk that
   *               holds it); a removal is passed on when the count reaches 0.
   * The maps lose an entry when its block is removed and are dropped whole by Cleared (the
   * tiers of the clear scope) and by reset(). Unsalted traffic with k == 1 keeps no per-block state at all.
   *
   * convert() first checks the batch for self-references without touching state, so a dropped
   * batch changes nothing. Event ids come from one counter that only grows, across resets.
   *
   * Hashers for salted events are cached by (lora, salt) in a small map that is emptied when it
   * reaches HASHER_CACHE entries.
   */

  private static final int HASHER_CACHE = 64;

  private record Key(int rank, StorageTier tier) {}

  private static final class RankState {
    final Map<Long, long[]> subBlocks = new HashMap<>();
    final Map<Long, Integer> subBlockRefs = new HashMap<>();
    final Map<Long, String> saltByHash = new HashMap<>();
    final Map<Long, Integer> tierRefs = new HashMap<>();
  }

  private final long workerId;
  private final int defaultDpRank;
  private final int engineBlockSize;
  private final int split;
  private final BlockHasher routerHasher;
  private final ClearScope clearScope;
  private final Map<Key, RankState> states = new LinkedHashMap<>();
  private final Map<String, BlockHasher> hashers = new HashMap<>();
  private long lastEventId;

  /**
   * A converter for the engine publisher of {@code workerId}.
   *
   * @param defaultDpRank the rank of batches that do not name one
   * @param engineBlockSize the engine's tokens per block; a multiple of the router's
   * @param routerHasher the router's hasher (block size, no salt: salts come from the events)
   * @throws IllegalArgumentException when {@code engineBlockSize} is not a positive multiple of the
   *     router's block size, or {@code defaultDpRank < 0}
   */
  public EngineEventConverter(
      long workerId, int defaultDpRank, int engineBlockSize, BlockHasher routerHasher) {
    this(workerId, defaultDpRank, engineBlockSize, routerHasher, ClearScope.DEVICE);
  }

  /**
   * A converter whose {@code AllBlocksCleared} empties the tiers {@code clearScope} names (the
   * four-argument constructor: {@link ClearScope#DEVICE}).
   */
  public EngineEventConverter(
      long workerId,
      int defaultDpRank,
      int engineBlockSize,
      BlockHasher routerHasher,
      ClearScope clearScope) {
    this.clearScope = Objects.requireNonNull(clearScope, "clearScope");
    this.routerHasher = Objects.requireNonNull(routerHasher, "routerHasher");
    checkBlockSizes(engineBlockSize, routerHasher.blockSize());
    if (defaultDpRank < 0) {
      throw new IllegalArgumentException("defaultDpRank must be >= 0, got " + defaultDpRank);
    }
    this.workerId = workerId;
    this.defaultDpRank = defaultDpRank;
    this.engineBlockSize = engineBlockSize;
    this.split = engineBlockSize / routerHasher.blockSize();
  }

  /**
   * Checks that an engine's block size can be split into whole router blocks.
   *
   * @throws IllegalArgumentException with a message that says what to change, when it cannot
   */
  public static void checkBlockSizes(int engineBlockSize, int routerBlockSize) {
    if (engineBlockSize < 1) {
      throw new IllegalArgumentException(
          "engine block size must be >= 1 token, got " + engineBlockSize);
    }
    if (engineBlockSize % routerBlockSize != 0) {
      throw new IllegalArgumentException(
          "engine block size "
              + engineBlockSize
              + " is not a multiple of the router block size "
              + routerBlockSize
              + ": kvrouter can only split an engine block into whole router blocks;"
              + " run the router with a block size that divides "
              + engineBlockSize
              + " (the engine's own block size always works)");
    }
  }

  /** The worker id every event is attributed to. */
  public long workerId() {
    return workerId;
  }

  /** The tiers an {@code AllBlocksCleared} empties. */
  public ClearScope clearScope() {
    return clearScope;
  }

  /** The engine's tokens per block. */
  public int engineBlockSize() {
    return engineBlockSize;
  }

  /** The worker rank a batch is attributed to: its own rank, or the default. */
  public Worker workerOf(KvEventBatch batch) {
    return new Worker(workerId, rankOf(batch));
  }

  /** The rank of {@link #workerOf}, without making the worker. */
  public int rankOf(KvEventBatch batch) {
    Integer r = batch.dpRank();
    return r != null ? r : defaultDpRank;
  }

  /** Converts one batch; see the class description for the rules. */
  public ConvertedBatch convert(KvEventBatch batch) {
    String selfReference = findSelfReference(batch.events());
    if (selfReference != null) {
      return ConvertedBatch.drop(selfReference);
    }
    final Worker worker = workerOf(batch);
    List<TieredEvent> out = new ArrayList<>(batch.events().size());
    int ignored = 0;
    int refused = 0;
    int droppedBlocks = 0;
    int placeholders = 0;
    for (EngineEvent e : batch.events()) {
      switch (e) {
        case EngineEvent.AllBlocksCleared c -> {
          if (clearScope == ClearScope.DEVICE) {
            states.remove(new Key(worker.dpRank(), StorageTier.DEVICE));
            out.add(emit(worker, StorageTier.DEVICE, CacheEvent.cleared()));
          } else {
            for (StorageTier tier : StorageTier.values()) {
              states.remove(new Key(worker.dpRank(), tier));
              out.add(emit(worker, tier, CacheEvent.cleared()));
            }
          }
        }
        case EngineEvent.BlockStored s -> {
          if (!isMainGroup(s.groupIdx(), s.kvCacheSpecKind())) {
            ignored++;
          } else if (s.tokenIds().length == 0
              && StorageTier.ofMedium(s.medium()) != StorageTier.DEVICE) {
            placeholders++;
          } else if (s.blockSize() != engineBlockSize) {
            refused++;
          } else {
            int blocks = Math.min(s.blockHashes().length, s.tokenIds().length / engineBlockSize);
            droppedBlocks += s.blockHashes().length - blocks;
            if (blocks > 0) {
              StorageTier tier = StorageTier.ofMedium(s.medium());
              RankState st = state(worker, tier);
              if (tier != StorageTier.DEVICE) {
                for (int j = 0; j < blocks; j++)
                  st.tierRefs.merge(s.blockHashes()[j], 1, Integer::sum);
              }
              out.add(emit(worker, tier, stored(st, s, blocks)));
            }
          }
        }
        case EngineEvent.BlockRemoved r -> {
          if (!isMainGroup(r.groupIdx(), r.kvCacheSpecKind())) {
            ignored++;
          } else if (r.blockHashes().length > 0) {
            StorageTier tier = StorageTier.ofMedium(r.medium());
            RankState st = state(worker, tier);
            long[] hashes = tier == StorageTier.DEVICE ? r.blockHashes() : lastReferences(st, r);
            if (hashes.length > 0) out.add(emit(worker, tier, removed(st, hashes)));
          }
        }
      }
    }
    return new ConvertedBatch(out, ignored, refused, droppedBlocks, placeholders, null);
  }

  /**
   * Forgets everything learned from this publisher (it restarted) and returns one {@code Cleared}
   * event for every (rank, tier) it had published for, so the index drops their blocks too.
   */
  public List<TieredEvent> reset() {
    List<TieredEvent> out = new ArrayList<>(states.size());
    for (Key k : states.keySet()) {
      out.add(emit(new Worker(workerId, k.rank()), k.tier(), CacheEvent.cleared()));
    }
    states.clear();
    return out;
  }

  /**
   * Forgets what was learned about {@code rank}'s device blocks and returns a {@code Cleared} event
   * for them: for a subscriber about to rebuild the rank from the engine's whole history.
   */
  public TieredEvent clearRank(int rank) {
    Worker w = new Worker(workerId, rank);
    states.remove(new Key(rank, StorageTier.DEVICE));
    return emit(w, StorageTier.DEVICE, CacheEvent.cleared());
  }

  /** The id of the last event made, 0 before the first. */
  public long lastEventId() {
    return lastEventId;
  }

  // ---------------------------------------------------------------- conversion

  private CacheEvent stored(RankState st, EngineEvent.BlockStored s, int blocks) {
    final int k = split;
    final int routerBlocks = blocks * k;
    final long[] engineHashes = s.blockHashes();
    int[] tokens = s.tokenIds();
    if (tokens.length != blocks * engineBlockSize) {
      tokens = Arrays.copyOf(tokens, blocks * engineBlockSize);
    }
    String lora = s.loraName() != null ? s.loraName() : loraFromId(s.loraId());
    String salt = salt(st, s, lora);
    long[] local = hasher(lora, salt).localHashes(tokens, mmHashes(s, blocks));

    long[] seq = new long[routerBlocks];
    boolean hasPrev = s.hasParent();
    long prev = s.parentBlockHash();
    for (int j = 0, idx = 0; j < blocks; j++) {
      long[] derived = k > 1 ? new long[k - 1] : null;
      for (int i = 0; i < k; i++, idx++) {
        long v;
        if (i == k - 1) {
          v = engineHashes[j];
        } else {
          v = hasPrev ? SequenceHasher.next(prev, local[idx]) : local[idx];
          derived[i] = v;
        }
        seq[idx] = v;
        prev = v;
        hasPrev = true;
      }
      if (derived != null && st.subBlocks.putIfAbsent(engineHashes[j], derived) == null) {
        for (long d : derived) st.subBlockRefs.merge(d, 1, Integer::sum);
      }
      if (salt != null) {
        st.saltByHash.put(engineHashes[j], salt);
      }
    }
    return s.hasParent()
        ? CacheEvent.stored(s.parentBlockHash(), seq, local)
        : CacheEvent.storedAtRoot(seq, local);
  }

  private CacheEvent removed(RankState st, long[] engineHashes) {
    if (split == 1) {
      if (!st.saltByHash.isEmpty()) {
        for (long h : engineHashes) st.saltByHash.remove(h);
      }
      return CacheEvent.removed(engineHashes.clone());
    }
    long[] out = new long[engineHashes.length * split];
    int n = 0;
    for (long h : engineHashes) {
      out[n++] = h; // the deepest router block first: no holes on the way
      long[] derived = st.subBlocks.remove(h);
      if (derived != null) {
        for (int i = derived.length - 1; i >= 0; i--) {
          // siblings whose first tokens agree share leading sub-blocks: keep them while used
          if (st.subBlockRefs.merge(derived[i], -1, Integer::sum) == 0) {
            st.subBlockRefs.remove(derived[i]);
            out[n++] = derived[i];
          }
        }
      }
      st.saltByHash.remove(h);
    }
    return CacheEvent.removed(n == out.length ? out : Arrays.copyOf(out, n));
  }

  /**
   * The hashes of an off-device removal whose last announcement this is: an offloading engine
   * announces a block again for each chunk that holds it (vLLM's self-describing events) and
   * removes it once per chunk, so a block leaves the tier when its count reaches 0. Hashes the tier
   * never stored (placeholder removals, repeats) are left out.
   */
  private static long[] lastReferences(RankState st, EngineEvent.BlockRemoved r) {
    long[] in = r.blockHashes();
    long[] out = new long[in.length];
    int n = 0;
    for (long h : in) {
      Integer c = st.tierRefs.get(h);
      if (c == null) continue;
      if (c == 1) {
        st.tierRefs.remove(h);
        out[n++] = h;
      } else {
        st.tierRefs.put(h, c - 1);
      }
    }
    return n == out.length ? out : Arrays.copyOf(out, n);
  }

  /** The cache salt of a store: explicit, from block 0's extra keys, or its parent chain's. */
  private static String salt(RankState st, EngineEvent.BlockStored s, String lora) {
    if (s.cacheSalt() != null && !s.cacheSalt().isEmpty()) {
      return s.cacheSalt();
    }
    if (!s.hasParent()) {
      List<List<Object>> keys = s.extraKeys();
      return keys == null || keys.isEmpty() ? null : ExtraKeys.cacheSalt(keys.get(0), lora);
    }
    return st.saltByHash.isEmpty() ? null : st.saltByHash.get(s.parentBlockHash());
  }

  private static String loraFromId(Long loraId) {
    return loraId == null ? null : Long.toString(loraId);
  }

  /** Multimodal hashes per router block, from 64-hex-digit identifiers in the extra keys. */
  private Map<Integer, long[]> mmHashes(EngineEvent.BlockStored s, int blocks) {
    List<List<Object>> keys = s.extraKeys();
    if (keys == null) {
      return Map.of();
    }
    Map<Integer, long[]> out = null;
    final int routerBlockSize = routerHasher.blockSize();
    for (int j = 0; j < Math.min(blocks, keys.size()); j++) {
      List<Object> blockKeys = keys.get(j);
      if (blockKeys == null) continue;
      for (Object key : blockKeys) {
        Long mm = ExtraKeys.mmHash(key);
        if (mm == null) continue;
        long sub = Math.max(0, Math.min(split - 1, ExtraKeys.mmOffset(key) / routerBlockSize));
        int routerBlock = j * split + (int) sub;
        if (out == null) out = new HashMap<>();
        long[] prev = out.get(routerBlock);
        long[] next = prev == null ? new long[1] : Arrays.copyOf(prev, prev.length + 1);
        next[next.length - 1] = mm;
        out.put(routerBlock, next);
      }
    }
    return out == null ? Map.of() : out;
  }

  private BlockHasher hasher(String lora, String salt) {
    if ((lora == null || lora.isEmpty()) && (salt == null || salt.isEmpty())) {
      return routerHasher;
    }
    String key =
        (lora == null ? "" : lora.length() + ":" + lora) + "|" + (salt == null ? "" : salt);
    BlockHasher h = hashers.get(key);
    if (h == null) {
      if (hashers.size() >= HASHER_CACHE) hashers.clear();
      h = routerHasher.withLora(lora).withNamespace(salt);
      hashers.put(key, h);
    }
    return h;
  }

  private RankState state(Worker w, StorageTier tier) {
    return states.computeIfAbsent(new Key(w.dpRank(), tier), k -> new RankState());
  }

  private TieredEvent emit(Worker w, StorageTier tier, CacheEvent data) {
    return new TieredEvent(tier, new RouterEvent(w, ++lastEventId, data));
  }

  /**
   * Whether an event belongs to the KV cache group the router indexes: full or MLA attention by
   * kind, else group 0 (or no group at all).
   */
  static boolean isMainGroup(Integer groupIdx, String kind) {
    if (kind != null) {
      return kind.equals("full_attention")
          || kind.equals("mla_attention")
          || kind.equals("sink_full_attention");
    }
    return groupIdx == null || groupIdx == 0;
  }

  /** Why a batch is self-referencing, or {@code null} when it is not. */
  static String findSelfReference(List<EngineEvent> events) {
    for (int e = 0; e < events.size(); e++) {
      if (!(events.get(e) instanceof EngineEvent.BlockStored s)) continue;
      long[] h = s.blockHashes();
      int n = h.length + (s.hasParent() ? 1 : 0);
      if (n < 2) continue;
      long[] all = Arrays.copyOf(h, n);
      if (s.hasParent()) all[n - 1] = s.parentBlockHash();
      Arrays.sort(all);
      for (int i = 1; i < n; i++) {
        if (all[i] == all[i - 1]) {
          boolean parent = s.hasParent() && all[i] == s.parentBlockHash();
          return "events["
              + e
              + "] (BlockStored) names block "
              + Long.toUnsignedString(all[i])
              + (parent ? " as its own parent" : " twice")
              + "; a block cannot be its own ancestor";
        }
      }
    }
    return null;
  }
}
