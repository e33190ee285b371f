package io.kvrouter.sim;

import io.kvrouter.sim.trace.TraceRequest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;

/**
 * How {@code simulate --admission} gives each trace request a tenant and a priority
 * (docs/SIMULATION.md, "Admission and fair shares"). The trace names neither, so a documented,
 * seeded rule assigns them:
 *
 * <ul>
 *   <li>A request's conversation is its second {@code hash_id} (its first block after the shared
 *       first one), or its only one. A conversation goes to one tenant, drawn with a seeded hash of
 *       (seed, conversation): tenant 0 has share {@code heavyFactor}, every other tenant share 1,
 *       so with {@code --heavy-tenant-factor 10} tenant 0 sends ten times as much as each other.
 *   <li>With {@code cachedTenant}, tenant 0 is instead every request whose prompt is mostly cached:
 *       at least half of its {@code hash_ids} appeared earlier in the trace (a follow-up turn, an
 *       agent loop); the other requests go to tenants 1..N-1 by conversation, equal shares.
 *   <li>With {@code prefixBlocks > 0} ({@code --cached-tenant-prefix BLOCKS[:PROMPTS[:OWN]]}),
 *       tenants are drawn by conversation with equal shares as above, and each of tenant 0's
 *       requests is sent behind one of {@code prefixPrompts} shared system prompts of {@code
 *       prefixBlocks} trace blocks: a tenant whose prompts are mostly a few long prefixes it
 *       reuses, so they stay cached under load. The prompt is a seeded draw per (seed,
 *       conversation), so every turn of a conversation has the same one. The request's hash_ids
 *       become the prompt's blocks followed by its own blocks renamed under that prompt (a Mooncake
 *       hash_id names a whole prefix, so the same trace block behind two different system prompts
 *       is a different block): prompt {@code k}'s block {@code j} is {@code -1 - k·2^40 - j}, trace
 *       block {@code h} under prompt {@code k} is {@code -1 - k·2^40 - 2^39 - h}; all negative, so
 *       none equals a trace id (the trace's are in 0..2^39 - 1, checked). Its input length grows by
 *       {@code prefixBlocks × 512} tokens; its output is unchanged. With {@code prefixOwn >= 0}
 *       only the request's first {@code prefixOwn} blocks are kept behind the prompt (its input cut
 *       to {@code prefixOwn × 512} tokens if longer): a long shared prompt before a short user
 *       part, so the request really costs less than another tenant's. The other tenants' requests
 *       are sent as in the trace.
 *   <li>A request is high priority (band 0) with probability {@code highPriorityShare}, drawn with
 *       a seeded hash of (seed, its index in the trace); the others are normal (band 1).
 * </ul>
 *
 * {@link #withoutHeavy} keeps every request of the other tenants and a seeded {@code 1/heavyFactor}
 * of tenant 0's conversations: the same trace with tenant 0 sending as much as each other tenant,
 * the baseline of "a tenant sending 10× more raises another's p90 TTFT by at most x".
 *
 * @param tenants tenants, at least 1 (at least 2 with cachedTenant)
 * @param heavyFactor tenant 0's share relative to each other tenant's, >= 1
 * @param highPriorityShare the share of requests in the high band, 0..1
 * @param cachedTenant whether tenant 0 is the mostly-cached requests (heavyFactor must be 1)
 * @param seed seeds the draws
 * @param prefixBlocks trace blocks of each shared system prompt before tenant 0's requests; 0: none
 * @param prefixPrompts how many shared system prompts tenant 0 has (>= 1)
 * @param prefixOwn behind a shared prompt, the most of a request's own blocks kept; -1: all
 */
public record TenantRule(
    int tenants,
    double heavyFactor,
    double highPriorityShare,
    boolean cachedTenant,
    long seed,
    int prefixBlocks,
    int prefixPrompts,
    int prefixOwn) {

  /** Trace hash_ids must be below this (and >= 0) with a shared prefix: see the renaming. */
  static final long MAX_TRACE_ID = 1L << 39;

  /** The longest shared system prompt, in trace blocks (32 M tokens). */
  static final int MAX_PREFIX_BLOCKS = 1 << 16;

  /** The most shared system prompts (so that every synthetic id stays far from overflow). */
  static final int MAX_PREFIX_PROMPTS = 1 << 12;

  /** No shared system prompts. */
  public TenantRule(
      int tenants, double heavyFactor, double highPriorityShare, boolean cachedTenant, long seed) {
    this(tenants, heavyFactor, highPriorityShare, cachedTenant, seed, 0, 1, -1);
  }

  /** Tenant and band of every request of a trace, in trace order. */
  public record Assignment(List<TraceRequest> requests, int[] tenant, int[] band) {
    /** Requests of {@code t}. */
    public int count(int t) {
      int n = 0;
      for (int x : tenant) if (x == t) n++;
      return n;
    }
  }

  public TenantRule {
    if (tenants < 1) throw new IllegalArgumentException("--tenants must be >= 1, got " + tenants);
    if (!(heavyFactor >= 1) || Double.isInfinite(heavyFactor)) {
      throw new IllegalArgumentException("--heavy-tenant-factor must be >= 1, got " + heavyFactor);
    }
    if (!(highPriorityShare >= 0 && highPriorityShare <= 1)) {
      throw new IllegalArgumentException(
          "--high-priority-share must be in 0..1, got " + highPriorityShare);
    }
    if (cachedTenant && tenants < 2) {
      throw new IllegalArgumentException("--cached-tenant needs --tenants >= 2");
    }
    if (cachedTenant && heavyFactor != 1) {
      throw new IllegalArgumentException(
          "--cached-tenant with --heavy-tenant-factor: tenant 0 is either heavy or cached");
    }
    if (prefixBlocks < 0 || prefixBlocks > MAX_PREFIX_BLOCKS) {
      throw new IllegalArgumentException(
          "--cached-tenant-prefix BLOCKS must be in 0.."
              + MAX_PREFIX_BLOCKS
              + ", got "
              + prefixBlocks);
    }
    if (prefixPrompts < 1 || prefixPrompts > MAX_PREFIX_PROMPTS) {
      throw new IllegalArgumentException(
          "--cached-tenant-prefix PROMPTS must be in 1.."
              + MAX_PREFIX_PROMPTS
              + ", got "
              + prefixPrompts);
    }
    if (prefixOwn < -1 || prefixOwn > MAX_PREFIX_BLOCKS) {
      throw new IllegalArgumentException(
          "--cached-tenant-prefix OWN must be in 0.."
              + MAX_PREFIX_BLOCKS
              + " (or -1: all), got "
              + prefixOwn);
    }
    if (prefixBlocks > 0 && tenants < 2) {
      throw new IllegalArgumentException("--cached-tenant-prefix needs --tenants >= 2");
    }
    if (prefixBlocks > 0 && (cachedTenant || heavyFactor != 1)) {
      throw new IllegalArgumentException(
          "--cached-tenant-prefix with --cached-tenant or --heavy-tenant-factor: tenant 0 is"
              + " either heavy, mostly follow-ups or behind shared prompts");
    }
  }

  /** Whether tenant 0's requests are sent behind shared system prompts. */
  public boolean sharedPrefix() {
    return prefixBlocks > 0;
  }

  /** Assigns every request of {@code trace}. */
  public Assignment assign(List<TraceRequest> trace) {
    int[] tenant = new int[trace.size()];
    int[] band = new int[trace.size()];
    HashSet<Long> seen = cachedTenant ? new HashSet<>() : null;
    double total = heavyFactor + (tenants - 1);
    for (int i = 0; i < trace.size(); i++) {
      TraceRequest r = trace.get(i);
      band[i] = unit(seed * 31 + 7, i) < highPriorityShare ? 0 : 1;
      long conv = conversation(r);
      if (cachedTenant) {
        int hits = 0;
        for (long h : r.hashIds()) if (seen.contains(h)) hits++;
        for (long h : r.hashIds()) seen.add(h);
        if (r.hashIds().length > 0 && 2 * hits >= r.hashIds().length) {
          tenant[i] = 0;
        } else {
          tenant[i] = 1 + (int) Math.min(tenants - 2, unit(seed, conv) * (tenants - 1));
        }
      } else {
        double u = unit(seed, conv) * total;
        tenant[i] = u < heavyFactor ? 0 : (int) Math.min(tenants - 1, 1 + (u - heavyFactor));
      }
    }
    if (!sharedPrefix()) return new Assignment(trace, tenant, band);
    List<TraceRequest> sent = new ArrayList<>(trace.size());
    for (int i = 0; i < trace.size(); i++) {
      TraceRequest r = trace.get(i);
      sent.add(tenant[i] == 0 ? behindPrompt(r, prompt(r)) : r);
    }
    return new Assignment(List.copyOf(sent), tenant, band);
  }

  /** The shared system prompt (0..prefixPrompts-1) of a tenant-0 request: per conversation. */
  int prompt(TraceRequest r) {
    return (int) Math.min(prefixPrompts - 1, unit(seed * 13 + 5, conversation(r)) * prefixPrompts);
  }

  /** Block {@code j} of shared system prompt {@code k}. */
  static long promptBlock(int k, int j) {
    return -1 - ((long) k << 40) - j;
  }

  /** Trace block {@code h} behind shared system prompt {@code k}. */
  static long renamed(int k, long h) {
    return -1 - ((long) k << 40) - MAX_TRACE_ID - h;
  }

  /** {@code r} sent behind shared system prompt {@code k} (the class comment's rule). */
  TraceRequest behindPrompt(TraceRequest r, int k) {
    long[] all = r.hashIds();
    long[] h = prefixOwn >= 0 && all.length > prefixOwn ? Arrays.copyOf(all, prefixOwn) : all;
    int own =
        prefixOwn >= 0
            ? Math.min(r.inputLength(), prefixOwn * TraceRequest.TRACE_BLOCK)
            : r.inputLength();
    long[] ids = new long[prefixBlocks + h.length];
    for (int j = 0; j < prefixBlocks; j++) ids[j] = promptBlock(k, j);
    for (int j = 0; j < h.length; j++) {
      if (h[j] < 0 || h[j] >= MAX_TRACE_ID) {
        throw new IllegalArgumentException(
            "trace line "
                + r.line()
                + ": hash_id "
                + h[j]
                + " is outside 0.."
                + (MAX_TRACE_ID - 1)
                + ", which --cached-tenant-prefix needs");
      }
      ids[prefixBlocks + j] = renamed(k, h[j]);
    }
    long input = own + (long) prefixBlocks * TraceRequest.TRACE_BLOCK;
    if (input > Integer.MAX_VALUE) {
      throw new IllegalArgumentException(
          "trace line " + r.line() + ": the prompt behind the shared prefix is too long");
    }
    return new TraceRequest(r.line(), r.timestampMs(), (int) input, r.outputLength(), ids);
  }

  /**
   * {@code a} without the heavy tenant's excess: every request of tenants 1..N-1 and those of
   * tenant 0 whose conversation is drawn with probability {@code 1/heavyFactor} (seeded).
   */
  public Assignment withoutHeavy(Assignment a) {
    List<TraceRequest> keep = new ArrayList<>();
    int[] tenant = new int[a.requests().size()];
    int[] band = new int[a.requests().size()];
    int n = 0;
    for (int i = 0; i < a.requests().size(); i++) {
      TraceRequest r = a.requests().get(i);
      if (a.tenant()[i] == 0 && unit(seed * 17 + 3, conversation(r)) >= 1 / heavyFactor) continue;
      keep.add(r);
      tenant[n] = a.tenant()[i];
      band[n++] = a.band()[i];
    }
    return new Assignment(keep, Arrays.copyOf(tenant, n), Arrays.copyOf(band, n));
  }

  /** A request's conversation: its second hash_id (the first is shared), or its only one. */
  static long conversation(TraceRequest r) {
    long[] h = r.hashIds();
    return h.length > 1 ? h[1] : h.length == 1 ? h[0] : -1;
  }

  /** A seeded uniform draw in [0, 1) from (seed, key): SplitMix64's finaliser. */
  static double unit(long seed, long key) {
    long z = seed * 0x9E3779B97F4A7C15L + key * 0xBF58476D1CE4E5B9L + 0x94D049BB133111EBL;
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    z = z ^ (z >>> 31);
    return (z >>> 11) * 0x1.0p-53;
  }
}
