package io.kvrouter.mockengine;

import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.KvCacheGroup;
import io.kvrouter.index.KvCacheGroups;
import it.unimi.dsi.fastutil.longs.Long2IntOpenHashMap;
import it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap;
import java.util.Arrays;
import java.util.Objects;

/**
 * One engine rank's KV cache for a hybrid model, as vLLM's allocator keeps it (docs/ingestion.md,
 * "Hybrid models: KV cache groups"; docs/mock-engine.md, "Hybrid models"): one pool of pages shared
 * by every KV cache group, one LRU free queue, each group caching its blocks under their hashes,
 * freeing and evicting them by its own rule, and the hit computed by vLLM's rule. It publishes
 * per-group stores and removals as vLLM does, through a {@link Listener}.
 *
 * <p>Not thread-safe: one engine thread calls it; the listener runs inside the call.
 *
 * <pre>
 * Implementation notes
 *
 * Pages 0..capacity-1. Per page: group (-1 when it caches nothing), hash (the §2 sequence hash of
 * the block it caches), refs (requests holding it), and prev/next links of the free queue, a
 * doubly linked list with head and tail (-1: none) holding exactly the pages with refs == 0, in
 * the order they were freed. Per group, cached maps a hash to its page. A page with refs == 0 that
 * still caches a block is evictable: allocation takes the queue's head and evicts what it caches
 * (one removal, as vLLM's BlockRemoved per block).
 *
 * A request (Held, by id) holds, per group, the pages of the positions it uses (page[group][p],
 * -1 where it holds none). Admission: the hit c (hit(), the rule below, at most (T-1)/bs); then the
 * pages the request needs: per full, sliding-window and chunked group one new page per position
 * c..n-1 (vLLM computes a whole prompt in one step here and caches every full block), per state
 * group one page per state it keeps: after block n-1 and, when the prompt ends on a block
 * boundary, after block n-2 (the state a later identical prompt needs, as it recomputes the last
 * token); plus the hit's pages that sit in the free queue. Not enough free pages: rejected,
 * nothing changed. Otherwise it touches the hit's pages (full: 0..c-1; sliding window: those from
 * vLLM's skipped-token boundary max(0, c*bs - W + 1)/bs on; state: c-1; chunked: from the chunk's
 * start), allocates group by group (evicting), caches, and publishes one store per group.
 *
 * Deviation from vLLM: a block a group already caches in another page (a hit cut short by another
 * group makes the request recompute it) moves to the new page, and the old page is left uncached
 * without an event; vLLM would cache both and publish a removal when either is evicted, which no
 * router can follow. So the events always describe the cache exactly.
 *
 * After the prefill (prefillDone, vLLM's remove_skipped_blocks at the first decode step) a
 * sliding window frees the pages before max(0, T - W + 1) tokens, a chunked group those before the
 * chunk holding T, a state group its states (the running state is not modelled); release frees
 * everything left, group after group, each group's pages last position first (vLLM frees a
 * request's blocks in reverse so its tail is evicted first). Freed pages stay cached until
 * allocation evicts them. Output tokens are not cached and partial blocks take no page, as in the
 * single-group PrefixCache model.
 *
 * The hit (hit()) mirrors vLLM's finders literally, independently of kvrouter's HybridIndex: full
 * attention scans from the left, a sliding window scans from the right counting contiguous cached
 * blocks (the first run of `need` gives the cut, else the run from block 0), a state scans from
 * the right for the first cached block, a chunked group counts from its chunk's start; the bound
 * is lowered group after group until a round changes nothing.
 * </pre>
 */
public final class HybridKvCache {

  /** Where the cache's events go, in the order vLLM publishes them. */
  public interface Listener {
    /**
     * Group {@code group} cached the blocks at {@code positions} (ascending) of the request's
     * prompt; their tokens are the range of blocks {@code fromBlock..toBlock-1}, which may hold
     * blocks the group does not keep (vLLM's null blocks, always the leading ones), and chain from
     * the block before {@code fromBlock} (none when it is 0).
     *
     * @param hashes the §2 sequence hashes of the blocks at {@code positions}
     * @param locals their local hashes
     * @param seq the §2 sequence hashes of the whole prompt (for the parent, {@code seq[fromBlock -
     *     1]})
     */
    void stored(
        int group,
        KvCacheGroup kind,
        int[] positions,
        long[] hashes,
        long[] locals,
        long[] seq,
        int fromBlock,
        int toBlock);

    /** Group {@code group} evicted the block whose §2 sequence hash is {@code hash}. */
    void removed(int group, long hash);
  }

  /** The outcome of {@link #admit}: admitted or not, and the hit in blocks. */
  public record Admission(boolean admitted, int cachedBlocks) {}

  private final Worker worker;
  private final int blockSize;
  private final int capacity;
  private final KvCacheGroups groups;
  private final BlockHasher hasher;
  private final Listener listener;

  private final int[] pageGroup;
  private final long[] pageHash;
  private final int[] refs;
  private final int[] prev;
  private final int[] next;
  private int head = -1;
  private int tail = -1;
  private int free;
  private final Long2IntOpenHashMap[] cached;
  private final Long2ObjectOpenHashMap<Held> requests = new Long2ObjectOpenHashMap<>();

  private static final class Held {
    final int tokens;
    final int[][] pages; // [group][position] -> page, -1 none

    Held(int tokens, int groups, int positions) {
      this.tokens = tokens;
      this.pages = new int[groups][positions];
      for (int[] p : pages) Arrays.fill(p, -1);
    }
  }

  /**
   * A cache of {@code capacity} pages for {@code worker}, blocks of {@code blockSize} tokens, the
   * groups {@code groups} (every group uses this block size).
   */
  public HybridKvCache(
      Worker worker, int blockSize, int capacity, KvCacheGroups groups, Listener listener) {
    if (blockSize < 1 || capacity < 1) {
      throw new IllegalArgumentException(
          "blockSize and capacity must be >= 1, got " + blockSize + " and " + capacity);
    }
    this.worker = Objects.requireNonNull(worker, "worker");
    this.blockSize = blockSize;
    this.capacity = capacity;
    this.groups = Objects.requireNonNull(groups, "groups");
    this.listener = Objects.requireNonNull(listener, "listener");
    this.hasher = BlockHasher.of(blockSize);
    this.pageGroup = new int[capacity];
    this.pageHash = new long[capacity];
    this.refs = new int[capacity];
    this.prev = new int[capacity];
    this.next = new int[capacity];
    Arrays.fill(pageGroup, -1);
    for (int p = 0; p < capacity; p++) append(p);
    this.cached = new Long2IntOpenHashMap[groups.size()];
    for (int g = 0; g < cached.length; g++) {
      cached[g] = new Long2IntOpenHashMap();
      cached[g].defaultReturnValue(-1);
    }
  }

  public Worker worker() {
    return worker;
  }

  public int blockSize() {
    return blockSize;
  }

  public KvCacheGroups groups() {
    return groups;
  }

  /** The hasher of this cache's blocks (block size, no salt). */
  public BlockHasher hasher() {
    return hasher;
  }

  /** Pages in the free queue (evictable or empty). */
  public int freePages() {
    return free;
  }

  /** Pages in all. */
  public int capacity() {
    return capacity;
  }

  /** Requests admitted and not released. */
  public int activeRequests() {
    return requests.size();
  }

  /** The §2 sequence hashes of the blocks group {@code group} caches now. */
  public long[] cachedHashes(int group) {
    return cached[group].keySet().toLongArray();
  }

  /**
   * The most pages a prompt of {@code tokens} tokens can need at admission (no hit): whether it can
   * ever be admitted.
   */
  public int pagesNeeded(int tokens) {
    int n = tokens / blockSize;
    int pages = 0;
    for (KvCacheGroup g : groups.groups()) {
      pages += g.kind() == KvCacheGroup.Kind.STATE ? states(tokens, n, 0).length : n;
    }
    return pages;
  }

  /**
   * How many leading full blocks of {@code tokens} group {@code group} caches (no cap, no other
   * group): for the main group, what a router's index of it scores.
   */
  public int cachedPrefix(int group, int[] tokens) {
    long[] seq = SequenceHasher.sequenceHashes(hasher.localHashes(tokens));
    int n = 0;
    while (n < seq.length && has(group, seq[n])) n++;
    return n;
  }

  /** The hit vLLM would find now for {@code tokens} (in blocks), changing nothing. */
  public int lookup(int[] tokens) {
    long[] seq = SequenceHasher.sequenceHashes(hasher.localHashes(tokens));
    return hit(seq, cap(tokens.length));
  }

  /**
   * Admits request {@code id}: finds its hit, takes the pages it needs (evicting), caches its new
   * blocks and publishes them. Returns not admitted, changing nothing, when the free queue cannot
   * supply the pages.
   *
   * @throws IllegalArgumentException when {@code id} is already admitted
   */
  public Admission admit(long id, int[] tokens) {
    if (requests.containsKey(id)) {
      throw new IllegalArgumentException("request " + id + " is already admitted");
    }
    final int t = tokens.length;
    final int n = t / blockSize;
    final long[] local = hasher.localHashes(tokens);
    final long[] seq = SequenceHasher.sequenceHashes(local);
    final int c = hit(seq, cap(t));
    final int gs = groups.size();

    // what the request takes: new pages, and hit pages that leave the free queue
    int needed = 0;
    int fromQueue = 0;
    final int[][] touch = new int[gs][];
    final int[][] fresh = new int[gs][];
    for (int g = 0; g < gs; g++) {
      KvCacheGroup k = groups.get(g);
      touch[g] = touched(k, c);
      fresh[g] = k.kind() == KvCacheGroup.Kind.STATE ? states(t, n, c) : range(c, n);
      needed += fresh[g].length;
      for (int p : touch[g]) {
        int page = cached[g].get(seq[p]);
        if (refs[page] == 0) fromQueue++;
      }
    }
    if (needed + fromQueue > free) return new Admission(false, c);

    final Held held = new Held(t, gs, n);
    for (int g = 0; g < gs; g++) {
      for (int p : touch[g]) {
        int page = cached[g].get(seq[p]);
        if (refs[page]++ == 0) unlink(page);
        held.pages[g][p] = page;
      }
    }
    // allocation, group by group (evicting from the queue's head), then caching and the stores
    for (int g = 0; g < gs; g++) {
      for (int p : fresh[g]) held.pages[g][p] = allocate();
    }
    for (int g = 0; g < gs; g++) {
      int[] pos = fresh[g];
      if (pos.length == 0) continue;
      long[] hashes = new long[pos.length];
      long[] locals = new long[pos.length];
      for (int i = 0; i < pos.length; i++) {
        int p = pos[i];
        int page = held.pages[g][p];
        int old = cached[g].put(seq[p], page);
        if (old >= 0) pageGroup[old] = -1; // a duplicate: the newer copy serves (class notes)
        pageGroup[page] = g;
        pageHash[page] = seq[p];
        hashes[i] = seq[p];
        locals[i] = local[p];
      }
      listener.stored(g, groups.get(g), pos, hashes, locals, seq, c, n);
    }
    requests.put(id, held);
    return new Admission(true, c);
  }

  /**
   * The prefill of {@code id} ended: its sliding-window groups free the blocks out of the window,
   * chunked groups those before the current chunk, state groups their states (vLLM's
   * remove_skipped_blocks at the next step). Does nothing for an unknown id.
   */
  public void prefillDone(long id) {
    Held h = requests.get(id);
    if (h == null) return;
    for (int g = 0; g < groups.size(); g++) {
      KvCacheGroup k = groups.get(g);
      int skipped =
          switch (k.kind()) {
            case FULL -> 0;
            case SLIDING_WINDOW -> Math.max(0, h.tokens - k.windowTokens() + 1) / blockSize;
            case CHUNKED_LOCAL -> h.tokens / k.windowTokens() * k.windowTokens() / blockSize;
            case STATE -> h.pages[g].length;
          };
      int[] pages = h.pages[g];
      for (int p = Math.min(skipped, pages.length) - 1; p >= 0; p--) {
        if (pages[p] >= 0) {
          release(pages[p]);
          pages[p] = -1;
        }
      }
    }
  }

  /** Releases what request {@code id} still holds; its blocks stay cached until evicted. */
  public void release(long id) {
    Held h = requests.remove(id);
    if (h == null) return;
    for (int[] pages : h.pages) {
      for (int p = pages.length - 1; p >= 0; p--) {
        if (pages[p] >= 0) release(pages[p]);
      }
    }
  }

  /**
   * Drops every cached block without events (the engine publishes one AllBlocksCleared).
   *
   * @throws IllegalStateException while a request holds pages (vLLM refuses to reset then)
   */
  public void clear() {
    if (!requests.isEmpty()) {
      throw new IllegalStateException(requests.size() + " requests hold pages");
    }
    Arrays.fill(pageGroup, -1);
    for (Long2IntOpenHashMap m : cached) m.clear();
  }

  // ---------------------------------------------------------------- the hit (vLLM's finders)

  private int cap(int tokens) {
    return Math.max(0, tokens - 1) / blockSize;
  }

  private boolean has(int g, long hash) {
    return cached[g].containsKey(hash);
  }

  /** vLLM's HybridKVCacheCoordinator.find_longest_cache_hit for the query {@code seq}. */
  int hit(long[] seq, int max) {
    int bound = Math.min(max, seq.length);
    final int main = groups.mainGroup();
    int full = 0;
    while (full < bound && has(main, seq[full])) full++;
    bound = full;
    while (true) {
      int before = bound;
      for (int g = 0; g < groups.size() && bound > 0; g++) {
        if (g == main) continue;
        KvCacheGroup k = groups.get(g);
        bound =
            switch (k.kind()) {
              case FULL -> {
                int x = 0;
                while (x < bound && has(g, seq[x])) x++;
                yield x;
              }
              case SLIDING_WINDOW -> {
                int need = k.windowBlocks(blockSize);
                int run = 0;
                int found = -1;
                for (int i = bound - 1; i >= 0; i--) {
                  if (has(g, seq[i])) {
                    if (++run >= need) {
                      found = i + run;
                      break;
                    }
                  } else {
                    run = 0;
                  }
                }
                yield found >= 0 ? found : run;
              }
              case STATE -> {
                int x = 0;
                for (int i = bound - 1; i >= 0; i--) {
                  if (has(g, seq[i])) {
                    x = i + 1;
                    break;
                  }
                }
                yield x;
              }
              case CHUNKED_LOCAL -> {
                int start =
                    (int)
                        ((long) bound
                            * blockSize
                            / k.windowTokens()
                            * k.windowTokens()
                            / blockSize);
                int x = start;
                while (x < bound && has(g, seq[x])) x++;
                yield x;
              }
            };
      }
      if (bound == before || bound == 0) return bound;
    }
  }

  // ---------------------------------------------------------------- pages

  /** The hit positions a group touches (vLLM's add_local_computed_blocks). */
  private int[] touched(KvCacheGroup k, int c) {
    return switch (k.kind()) {
      case FULL -> range(0, c);
      case SLIDING_WINDOW ->
          range(Math.max(0, c * blockSize - k.windowTokens() + 1) / blockSize, c);
      case STATE -> c > 0 ? new int[] {c - 1} : new int[0];
      case CHUNKED_LOCAL ->
          range((int) ((long) c * blockSize / k.windowTokens() * k.windowTokens() / blockSize), c);
    };
  }

  /**
   * The state positions a prompt of {@code t} tokens ({@code n} full blocks) caches past {@code c}.
   */
  private int[] states(int t, int n, int c) {
    int last = n - 1;
    int replay = cap(t) - 1; // the state a later identical prompt needs
    if (replay >= c && replay != last && last >= c) return new int[] {replay, last};
    if (last >= c) return new int[] {last};
    return new int[0];
  }

  private static int[] range(int from, int to) {
    if (to <= from) return new int[0];
    int[] out = new int[to - from];
    for (int i = 0; i < out.length; i++) out[i] = from + i;
    return out;
  }

  /** A page from the queue's head, evicting what it caches. */
  private int allocate() {
    int page = head;
    if (page < 0) throw new IllegalStateException("no free page (admission counted wrong)");
    unlink(page);
    refs[page] = 1;
    int g = pageGroup[page];
    if (g >= 0) {
      long hash = pageHash[page];
      cached[g].remove(hash);
      pageGroup[page] = -1;
      listener.removed(g, hash);
    }
    return page;
  }

  private void release(int page) {
    if (--refs[page] == 0) append(page);
  }

  private void append(int page) {
    prev[page] = tail;
    next[page] = -1;
    if (tail >= 0) next[tail] = page;
    else head = page;
    tail = page;
    free++;
  }

  private void unlink(int page) {
    int p = prev[page];
    int q = next[page];
    if (p >= 0) next[p] = q;
    else head = q;
    if (q >= 0) prev[q] = p;
    else tail = p;
    free--;
  }
}
