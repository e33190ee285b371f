package io.kvrouter.admission;

/**
 * Routing under load (docs/routing.md, "Admission", "Waiting for the prefix holder"): whether a
 * granted request should wait for the busy rank that holds the longest prefix of its prompt rather
 * than start now on the rank with room the router chose, priced in the queue's own unit, prefill
 * tokens.
 *
 * <p>On a saturated rank the prefill lane is the bottleneck: a request's first token comes after
 * the prefill tokens already in flight there and its own uncached ones. Started here, that is
 * {@code hereBacklog + (prompt − hereOverlap)}. Waiting for the holder, it enters the holder's lane
 * once the holder drops below its prefill limit, behind the holder's backlog now and the requests
 * that already wait for it: {@code holderBacklog + holderWaiting + (prompt − holderOverlap)}. The
 * request waits when that is smaller (ties start now): the wait then costs less than recomputing
 * the prefix elsewhere, and the fleet saves the difference in prefill work. A holder at its request
 * limit frees a place only when one of its requests ends, after a decode the router cannot time in
 * prefill tokens: it is never waited for.
 *
 * <pre>
 * Implementation notes
 *
 * A pure function of its arguments (no state, no allocation); the caller reads the figures from
 * the router (KvRouter.overlaps and KvRouter.loads) and keeps holderWaiting, the uncached prefill
 * tokens of the requests it parked for the holder and has not yet sent.
 * </pre>
 */
public final class HolderWait {
  private HolderWait() {}

  /**
   * Whether to wait for the holder (above).
   *
   * @param promptTokens the prompt's length
   * @param hereOverlapTokens prompt tokens the rank with room holds
   * @param hereBacklog prefill tokens in flight on the rank with room
   * @param holderOverlapTokens prompt tokens the holder holds
   * @param holderBacklog prefill tokens in flight on the holder
   * @param holderWaiting uncached prefill tokens of requests already waiting for the holder
   * @param holderAtRequestLimit whether the holder has as many requests in flight as it may
   */
  public static boolean waitForHolder(
      long promptTokens,
      long hereOverlapTokens,
      long hereBacklog,
      long holderOverlapTokens,
      long holderBacklog,
      long holderWaiting,
      boolean holderAtRequestLimit) {
    if (holderAtRequestLimit || holderOverlapTokens <= hereOverlapTokens) return false;
    long here = hereBacklog + Math.max(0, promptTokens - hereOverlapTokens);
    long there = holderBacklog + holderWaiting + Math.max(0, promptTokens - holderOverlapTokens);
    return there < here;
  }
}
