package io.kvrouter.transport.kvevents;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.KvCacheGroup;
import it.unimi.dsi.fastutil.longs.Long2LongOpenHashMap;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

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
 *       tier of the batch's rank (vLLM's offloaded copies survive its prefix-cache reset).
 *   <li>Hybrid models (docs/routing.md, "Hybrid models"): the events of the main KV cache group
 *       (events without {@code group_idx}; else the first full-attention group seen, or group 0
 *       while no store has named a kind) are converted as above. Those of every other group whose
 *       kind kvrouter scores (sliding window with its window, Mamba state, further full-attention
 *       groups) become {@link GroupEvent}s naming the positions the group holds by their §2
 *       sequence hashes; the others (chunked local attention, whose chunk vLLM does not publish,
 *       unknown kinds, groups without a kind, copies off the device) are ignored and counted.
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
   * Hybrid models: mainGroup is the group index whose events are the main path (null until a
   * store names a full-attention kind); groupKinds maps every other group index to the kind its
   * stores declared. Per (rank, group index) a GroupState keeps, for the blocks that group holds,
   *   seqOf       engine hash -> the §2 sequence hash of its position (Long2LongOpenHashMap: no
   *               boxing), written by a group store, consumed by a group removal; a continuation
   *               store chains from its parent's entry, so a store whose parent the group does
   *               not hold is ignored (counted), as the index rejects such a store on the main path
   *   saltByHash  as RankState's, for the group's own chains.
   * A group store's block_hashes name the trailing blocks of its token range (vLLM leaves out the
   * null blocks, which lead: docs/ingestion.md, "Hybrid models: KV cache groups"). A device
   * AllBlocksCleared drops the rank's group states and emits a group Cleared for every group the
   * converter knows, in the group events' order.
   *
   * convert() first checks the batch for self-references without touching state, so a dropped
   * batch changes nothing. Event ids come from one counter that only grows, across resets.
   *
   * Hashers for salted events are cached by (lora, salt) in a small map that is emptied when it
   * reaches HASHER_CACHE entries.
   */

  private static final int HASHER_CACHE = 64;

  /** The derived router blocks of an engine block that is not split (k == 1): none. */
  private static final long[] NO_DERIVED = new long[0];

  private record Key(int rank, StorageTier tier) {}

  private record GroupKey(int rank, int group) {}

  private static final class GroupState {
    final Long2LongOpenHashMap seqOf = new Long2LongOpenHashMap();
    final Map<Long, String> saltByHash = new HashMap<>();
  }

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
  private final Map<GroupKey, GroupState> groupStates = new HashMap<>();
  private final Map<Integer, KvCacheGroup> groupKinds = new LinkedHashMap<>();
  private @Nullable Integer mainGroup; // null: no store named a full-attention kind yet
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
    List<GroupEvent> groupOut = null;
    String groupProblem = null;
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
          if (!groupKinds.isEmpty()) {
            if (groupOut == null) groupOut = new ArrayList<>();
            for (Map.Entry<Integer, KvCacheGroup> g : groupKinds.entrySet()) {
              groupStates.remove(new GroupKey(worker.dpRank(), g.getKey()));
              groupOut.add(
                  new GroupEvent(g.getKey(), g.getValue(), event(worker, CacheEvent.cleared())));
            }
          }
        }
        case EngineEvent.BlockStored s -> {
          Integer group = groupOf(s.groupIdx(), s.kvCacheSpecKind(), s.kvCacheSpecSlidingWindow());
          if (group != null && group < 0) {
            ignored++;
            if (groupProblem == null) groupProblem = unscoredKind(s);
          } else if (group != null) {
            String problem = groupStoreProblem(s);
            if (problem != null) {
              refused++;
              if (groupProblem == null) groupProblem = problem;
            } else {
              GroupEvent g = groupStored(worker, group, s);
              if (g == null) {
                ignored++;
              } else {
                if (groupOut == null) groupOut = new ArrayList<>();
                groupOut.add(g);
              }
            }
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
          Integer group = groupOfRemoval(r.groupIdx());
          if (group != null && group < 0) {
            ignored++;
          } else if (group != null) {
            if (StorageTier.ofMedium(r.medium()) != StorageTier.DEVICE) {
              ignored++;
            } else {
              GroupEvent g = groupRemoved(worker, group, r);
              if (g != null) {
                if (groupOut == null) groupOut = new ArrayList<>();
                groupOut.add(g);
              }
            }
          } else if (r.blockHashes().length > 0) {
            StorageTier tier = StorageTier.ofMedium(r.medium());
            RankState st = state(worker, tier);
            long[] hashes = tier == StorageTier.DEVICE ? r.blockHashes() : lastReferences(st, r);
            if (hashes.length > 0) out.add(emit(worker, tier, removed(st, hashes)));
          }
        }
      }
    }
    return new ConvertedBatch(
        out,
        ignored,
        refused,
        droppedBlocks,
        placeholders,
        null,
        groupOut == null ? List.of() : groupOut,
        groupProblem);
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
    groupStates.clear(); // the router's device Cleared clears the rank's groups too
    return out;
  }

  /**
   * Forgets what was learned about {@code rank}'s device blocks and returns a {@code Cleared} event
   * for them: for a subscriber about to rebuild the rank from the engine's whole history.
   */
  public TieredEvent clearRank(int rank) {
    Worker w = new Worker(workerId, rank);
    states.remove(new Key(rank, StorageTier.DEVICE));
    groupStates.keySet().removeIf(k -> k.rank() == rank);
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
      long[] derived = k > 1 ? new long[k - 1] : NO_DERIVED;
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
      if (derived.length > 0 && st.subBlocks.putIfAbsent(engineHashes[j], derived) == null) {
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
  private static @Nullable String salt(
      RankState st, EngineEvent.BlockStored s, @Nullable String lora) {
    if (s.cacheSalt() != null && !s.cacheSalt().isEmpty()) {
      return s.cacheSalt();
    }
    if (!s.hasParent()) {
      List<@Nullable List<@Nullable Object>> keys = s.extraKeys();
      return keys == null || keys.isEmpty() ? null : ExtraKeys.cacheSalt(keys.get(0), lora);
    }
    return st.saltByHash.isEmpty() ? null : st.saltByHash.get(s.parentBlockHash());
  }

  private static @Nullable String loraFromId(@Nullable Long loraId) {
    return loraId == null ? null : Long.toString(loraId);
  }

  /** Multimodal hashes per router block, from 64-hex-digit identifiers in the extra keys. */
  private Map<Integer, long[]> mmHashes(EngineEvent.BlockStored s, int blocks) {
    List<@Nullable List<@Nullable Object>> keys = s.extraKeys();
    if (keys == null) {
      return Map.of();
    }
    Map<Integer, long[]> out = null;
    final int routerBlockSize = routerHasher.blockSize();
    for (int j = 0; j < Math.min(blocks, keys.size()); j++) {
      List<@Nullable Object> blockKeys = keys.get(j);
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

  private BlockHasher hasher(@Nullable String lora, @Nullable String salt) {
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
    return new TieredEvent(tier, event(w, data));
  }

  private RouterEvent event(Worker w, CacheEvent data) {
    return new RouterEvent(w, ++lastEventId, data);
  }

  // ---------------------------------------------------------------- hybrid models

  /** The KV cache group kinds this converter has learned, by group index (not the main one). */
  public Map<Integer, KvCacheGroup> groupKinds() {
    return Map.copyOf(groupKinds);
  }

  /** The main group's index once a store named a full-attention kind, else null. */
  public @Nullable Integer mainGroup() {
    return mainGroup;
  }

  /**
   * Where a store goes: null for the main path, a group index for a group event, -1 to ignore it (a
   * kind kvrouter does not score, or a group without a kind other than group 0). Learns the main
   * group and the groups' kinds.
   */
  private @Nullable Integer groupOf(
      @Nullable Integer groupIdx, @Nullable String kind, @Nullable Integer window) {
    if (groupIdx == null) return null;
    if (kind == null) {
      if (groupKinds.containsKey(groupIdx)) return groupIdx;
      return isMain(groupIdx) ? null : -1;
    }
    KvCacheGroup g = groupKind(kind, window);
    if (g == null) return -1;
    if (g.kind() == KvCacheGroup.Kind.FULL
        && mainGroup == null
        && !groupKinds.containsKey(groupIdx)) {
      mainGroup = groupIdx;
    }
    if (mainGroup != null && mainGroup.equals(groupIdx)) return null;
    KvCacheGroup known = groupKinds.putIfAbsent(groupIdx, g);
    if (known != null && !known.equals(g))
      return -1; // the engine renamed a group: not ours to guess
    return groupIdx;
  }

  /**
   * Where a removal goes: a removal names its group by index alone (vLLM sends the kind on stores
   * only, and a map-form kind on a removal is not needed), so a group the stores declared, else the
   * main path for the main group, else ignored (-1).
   */
  private @Nullable Integer groupOfRemoval(@Nullable Integer groupIdx) {
    if (groupIdx == null) return null;
    if (groupKinds.containsKey(groupIdx)) return groupIdx;
    return isMain(groupIdx) ? null : -1;
  }

  private boolean isMain(int groupIdx) {
    return mainGroup != null ? mainGroup == groupIdx : groupIdx == 0;
  }

  /**
   * The group a vLLM kind names, or null when kvrouter cannot score it (chunked local attention,
   * whose chunk vLLM does not publish; a sliding window without its window; other kinds).
   */
  static @Nullable KvCacheGroup groupKind(String kind, @Nullable Integer window) {
    return switch (kind) {
      case "full_attention", "mla_attention", "sink_full_attention" -> KvCacheGroup.full();
      case "sliding_window", "sliding_window_mla" ->
          window != null && window >= 1 ? KvCacheGroup.slidingWindow(window) : null;
      case "mamba" -> KvCacheGroup.state();
      default -> null;
    };
  }

  private static String unscoredKind(EngineEvent.BlockStored s) {
    String kind = s.kvCacheSpecKind();
    if (kind == null) {
      return "KV cache group "
          + s.groupIdx()
          + " publishes no kv_cache_spec_kind (vLLM before #40984): its kind is unknown, so its"
          + " events are ignored and the model is scored on its main group alone";
    }
    if (kind.startsWith("sliding_window")) {
      return "KV cache group "
          + s.groupIdx()
          + " ("
          + kind
          + ") publishes no usable kv_cache_spec_sliding_window ("
          + s.kvCacheSpecSlidingWindow()
          + "); its events are ignored";
    }
    return "KV cache group "
        + s.groupIdx()
        + " is of kind '"
        + kind
        + "', which kvrouter does not score"
        + (kind.equals("chunked_local_attention")
            ? " from events (vLLM does not publish the chunk size)"
            : "")
        + "; its events are ignored";
  }

  /** Why a group store cannot be converted, or null. */
  private @Nullable String groupStoreProblem(EngineEvent.BlockStored s) {
    if (StorageTier.ofMedium(s.medium()) != StorageTier.DEVICE) {
      return null; // ignored below, not refused
    }
    if (split != 1) {
      return "KV cache group "
          + s.groupIdx()
          + ": hybrid scoring needs the router's block size equal to the engine's ("
          + engineBlockSize
          + " tokens, the router splits them into "
          + split
          + "); the group's events are refused";
    }
    if (s.blockSize() != engineBlockSize) {
      return "KV cache group "
          + s.groupIdx()
          + " ("
          + s.kvCacheSpecKind()
          + ") has blocks of "
          + s.blockSize()
          + " tokens, the main group "
          + engineBlockSize
          + ": kvrouter scores a hybrid model only when every group uses one block size; the"
          + " group's events are refused";
    }
    return null;
  }

  /**
   * A group store as the positions its group now holds, or null when it names none or chains from a
   * parent the group does not hold (or is about copies off the device).
   */
  private @Nullable GroupEvent groupStored(Worker worker, int group, EngineEvent.BlockStored s) {
    if (StorageTier.ofMedium(s.medium()) != StorageTier.DEVICE) return null;
    final int m = s.tokenIds().length / engineBlockSize;
    final int held = Math.min(s.blockHashes().length, m);
    if (held == 0) return null;
    GroupState st =
        groupStates.computeIfAbsent(new GroupKey(worker.dpRank(), group), k -> new GroupState());
    long prev = 0;
    if (s.hasParent()) {
      if (!st.seqOf.containsKey(s.parentBlockHash())) return null;
      prev = st.seqOf.get(s.parentBlockHash());
    }
    int[] tokens = s.tokenIds();
    if (tokens.length != m * engineBlockSize) tokens = Arrays.copyOf(tokens, m * engineBlockSize);
    String lora = s.loraName() != null ? s.loraName() : loraFromId(s.loraId());
    String salt = groupSalt(st, s, lora);
    long[] local = hasher(lora, salt).localHashes(tokens, mmHashes(s, m));
    long[] seq = new long[held];
    long[] heldLocal = new long[held];
    final int first = m - held; // the trailing blocks of the range are the ones held
    final int hashOffset = s.blockHashes().length - held;
    boolean hasPrev = s.hasParent();
    for (int i = 0; i < m; i++) {
      long v = hasPrev ? SequenceHasher.next(prev, local[i]) : local[i];
      prev = v;
      hasPrev = true;
      if (i >= first) {
        long engineHash = s.blockHashes()[hashOffset + i - first];
        seq[i - first] = v;
        heldLocal[i - first] = local[i];
        st.seqOf.put(engineHash, v);
        if (salt != null) st.saltByHash.put(engineHash, salt);
      }
    }
    return new GroupEvent(
        group, groupKinds.get(group), event(worker, CacheEvent.storedAtRoot(seq, heldLocal)));
  }

  private @Nullable GroupEvent groupRemoved(Worker worker, int group, EngineEvent.BlockRemoved r) {
    GroupState st = groupStates.get(new GroupKey(worker.dpRank(), group));
    if (st == null) return null;
    long[] out = new long[r.blockHashes().length];
    int n = 0;
    for (long h : r.blockHashes()) {
      if (st.seqOf.containsKey(h)) {
        out[n++] = st.seqOf.remove(h);
        st.saltByHash.remove(h);
      }
    }
    if (n == 0) return null;
    return new GroupEvent(
        group,
        groupKinds.get(group),
        event(worker, CacheEvent.removed(n == out.length ? out : Arrays.copyOf(out, n))));
  }

  private static @Nullable String groupSalt(
      GroupState st, EngineEvent.BlockStored s, @Nullable String lora) {
    if (s.cacheSalt() != null && !s.cacheSalt().isEmpty()) {
      return s.cacheSalt();
    }
    if (!s.hasParent()) {
      List<@Nullable List<@Nullable Object>> keys = s.extraKeys();
      return keys == null || keys.isEmpty() ? null : ExtraKeys.cacheSalt(keys.get(0), lora);
    }
    return st.saltByHash.isEmpty() ? null : st.saltByHash.get(s.parentBlockHash());
  }

  /** Why a batch is self-referencing, or {@code null} when it is not. */
  static @Nullable String findSelfReference(List<EngineEvent> events) {
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
