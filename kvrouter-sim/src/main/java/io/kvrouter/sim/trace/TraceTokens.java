package io.kvrouter.sim.trace;

/**
 * Turns a trace request's {@code hash_ids} into prompt tokens: each id becomes a fixed block of 512
 * token ids, so two requests share exactly the token prefix that their id lists share, at any
 * router block size.
 *
 * <pre>
 * Implementation notes
 *
 * Token t (0..511) of id h is the low 32 bits of SplitMix64's finaliser applied to h * 512 + t
 * (plus the golden-ratio increment): a pure function of (h, t), so equal ids give equal blocks in
 * every request, run and policy, and different ids give unrelated blocks (two 64-token blocks of
 * different ids are equal with probability about 2^-2048). Dynamo's benchmark uses 512 copies of
 * h instead; then every 64-token block of one id has the same local hash, which a tree index
 * tolerates but which makes position-free structures look better than they are.
 *
 * A prompt of n tokens is ids[0..] expanded and cut at n: the last id is partial, exactly as in
 * the trace. Tokens are regenerated whenever needed instead of kept for the whole run (12 k
 * tokens take about 10-20 µs), so a long queue of waiting requests holds no token arrays.
 * </pre>
 */
public final class TraceTokens {
  private TraceTokens() {}

  /** Token {@code t} ({@code 0 <= t < 512}) of the block named by {@code hashId}. */
  public static int token(long hashId, int t) {
    long z = hashId * TraceRequest.TRACE_BLOCK + t + 0x9E3779B97F4A7C15L;
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return (int) (z ^ (z >>> 31));
  }

  /** The prompt of {@code r}: {@code r.inputLength()} tokens. */
  public static int[] tokens(TraceRequest r) {
    final int n = r.inputLength();
    final long[] ids = r.hashIds();
    final int[] out = new int[n];
    // token(ids[b], t) block by block: one loop of independent iterations, which the JIT
    // vectorises (about 5x faster than a token() call per token, issue 35)
    for (int b = 0, i = 0; i < n; b++) {
      final long base = ids[b] * TraceRequest.TRACE_BLOCK + 0x9E3779B97F4A7C15L - i;
      final int end = Math.min(n, i + TraceRequest.TRACE_BLOCK);
      for (; i < end; i++) {
        long z = base + i;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        out[i] = (int) (z ^ (z >>> 31));
      }
    }
    return out;
  }
}
