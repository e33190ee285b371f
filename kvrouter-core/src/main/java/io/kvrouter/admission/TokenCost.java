package io.kvrouter.admission;

/**
 * What a request costs the admission queue and the token-rate limits (docs/routing.md, "Fair shares
 * by real cost" and "Token-rate limits"): its uncached prefill tokens plus its decode tokens,
 * predicted at admission from the router's overlap and settled on what the engine reports. One
 * place for the arithmetic that the gateway (Proxy) and the simulator (AdmissionSimulation) both
 * do, so that the two cannot drift apart.
 *
 * <pre>
 * Implementation notes
 *
 * Stateless static functions on longs: no allocation, no lock, no boxing (the gateway calls them
 * on its per-request path). Token counts are at least 0; a negative reported count means that the
 * engine did not report it, and the prediction stands for it.
 * </pre>
 */
public final class TokenCost {
  private TokenCost() {}

  /**
   * The prompt tokens outside the {@code overlapBlocks} blocks of {@code blockSize} tokens that the
   * router predicts cached: {@code max(0, promptTokens - overlapBlocks * blockSize)}.
   */
  public static long uncached(long promptTokens, long overlapBlocks, long blockSize) {
    return Math.max(0, promptTokens - overlapBlocks * blockSize);
  }

  /**
   * What settling a charge of {@code chargedUncached + chargedDecode} on the engine's report
   * changes it by: the actual uncached prompt tokens ({@code promptTokens - cachedTokens}, at least
   * 0; {@code chargedUncached} when either is not reported) plus the actual decode tokens ({@code
   * completionTokens}; {@code chargedDecode} when not reported), less the charge.
   */
  public static long settlement(
      long promptTokens,
      long cachedTokens,
      long completionTokens,
      long chargedUncached,
      long chargedDecode) {
    long uncached =
        promptTokens >= 0 && cachedTokens >= 0
            ? Math.max(0, promptTokens - cachedTokens)
            : chargedUncached;
    long decode = completionTokens >= 0 ? completionTokens : chargedDecode;
    return uncached + decode - (chargedUncached + chargedDecode);
  }
}
