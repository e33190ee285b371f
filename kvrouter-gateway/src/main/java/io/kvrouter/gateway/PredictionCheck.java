package io.kvrouter.gateway;

import io.kvrouter.event.Worker;
import io.kvrouter.route.KvRouter;
import io.kvrouter.route.RouteOptions;
import io.kvrouter.server.RouterModel;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Compares, for every request an engine answered with {@code usage}, the prefix overlap the router
 * predicted with the cached tokens the engine reported; counts it (metrics, {@code /workers}) and
 * warns, rate-limited, when an engine disagrees persistently.
 *
 * <pre>
 * Implementation notes
 *
 * Granularity: each engine is compared at its own. expected = the predicted overlap capped to
 * what the engine can report: it never serves the prompt's last token from its cache (vLLM
 * recomputes it to get logits; llama.cpp re-evaluates the last token of a prompt it holds whole),
 * and it reuses whole units of its cache's granule g (vLLM's block size, SGLang's page size, 1
 * token for llama.cpp; the rank's engine block size when the engine does not say), so expected =
 * floor(min(predicted, prompt_tokens - 1) / g) * g. The router predicts whole blocks of its own
 * size bs, so a report of r cached tokens agrees (exact) when expected <= r < expected + bs: a
 * token-granular engine that matched part of the next block (the rest of an earlier prompt's last
 * block) holds what was predicted, and a block engine reports multiples of g >= bs, for which this
 * is r == expected. r < expected is engine_fewer, r >= expected + bs engine_more. An engine that
 * leaves prompt_tokens_details out (vLLM does when cached_tokens is 0, and always without
 * --enable-prompt-tokens-details) counts as 0 once it has shown details at least once; before
 * that the request is not compared.
 *
 * Correction: for a rank tracked by predictions (kv_source predicted) the same report goes to
 * KvRouter.observeCachedTokens (with the raw prediction: the router applies the same last-token
 * and block cap), except when the engine's prompt_tokens differs from the gateway's, where the
 * report is about other tokens.
 *
 * Window per (model, engine): the last WINDOW outcomes in a ring under the window's monitor
 * (held for a few stores, no I/O). When at least MIN_SAMPLES of the window are in and half or
 * more disagree in one direction, a warning is logged, at most once per warnInterval per
 * window and direction. Windows are kept per (model, base URL) and showsDetails per base URL;
 * the health round drops those of engines no longer registered (retain), so both are bounded by
 * the registrations (and what one health interval's churn adds).
 * </pre>
 */
final class PredictionCheck {
  static final Logger LOG = Logger.getLogger("io.kvrouter.gateway.prediction");
  static final int WINDOW = 32;
  static final int MIN_SAMPLES = 8;

  private final GatewayMetrics metrics;
  private final long warnNanos;
  private final ConcurrentHashMap<String, Window> windows = new ConcurrentHashMap<>();
  private final ConcurrentHashMap<String, Boolean> showsDetails = new ConcurrentHashMap<>();

  PredictionCheck(GatewayMetrics metrics, long warnNanos) {
    this.metrics = metrics;
    this.warnNanos = warnNanos;
  }

  /**
   * Keeps the windows of the registered (model, base URL) pairs ({@code model + "\u0000" + url})
   * and what is known of the registered base URLs; drops the rest.
   */
  void retain(Set<String> modelUrls, Set<String> urls) {
    windows.keySet().retainAll(modelUrls);
    showsDetails.keySet().retainAll(urls);
  }

  /** Windows kept (tests). */
  int windowCount() {
    return windows.size();
  }

  /** Base URLs known to report prompt details (tests). */
  int detailCount() {
    return showsDetails.size();
  }

  /** The expected cached tokens for a prediction; see the implementation notes. */
  static long expected(long predicted, long promptTokens, int engineBlockSize) {
    long cap = Math.min(predicted, Math.max(0, promptTokens - 1));
    return cap / engineBlockSize * engineBlockSize;
  }

  /**
   * How a report of {@code reported} cached tokens compares with {@code expected} for a router of
   * {@code blockSize}-token blocks: -1 engine_fewer, 0 exact, 1 engine_more (implementation notes).
   */
  static int outcome(long reported, long expected, int blockSize) {
    if (reported < expected) return -1;
    return reported >= expected + blockSize ? 1 : 0;
  }

  /**
   * Records one answered request; for a predicted rank also hands the report to the router ({@code
   * KvRouter.observeCachedTokens}), which corrects its predictions with it.
   *
   * @param granule the tokens the engine's cache reuses in whole units of (Engines.granule)
   * @param predictedRank whether the rank is tracked by predictions (kv_source predicted)
   * @param tokens the prompt as the gateway tokenized it (and routed it)
   * @param options the options it was routed with (their salt)
   */
  void record(
      RouterModel model,
      Worker worker,
      String baseUrl,
      int granule,
      boolean predictedRank,
      long predicted,
      int[] tokens,
      RouteOptions options,
      Usage u) {
    final int gatewayPromptTokens = tokens.length;
    if (u == null || !u.usage || u.promptTokens < 0) return;
    String engine = Long.toUnsignedString(worker.workerId());
    String key = model.modelName() + "\u0000" + baseUrl;
    long reported;
    if (u.details && u.cachedTokens >= 0) {
      showsDetails.putIfAbsent(baseUrl, Boolean.TRUE);
      reported = u.cachedTokens;
    } else if (showsDetails.containsKey(baseUrl)) {
      reported = 0;
    } else {
      return;
    }
    boolean promptMismatch = u.promptTokens != gatewayPromptTokens;
    if (promptMismatch)
      metrics.prediction.promptMismatch.labelValues(model.modelName(), engine).inc();
    KvRouter router = model.router();
    if (predictedRank && !promptMismatch) {
      // the engine's word on the prefix it had; a prompt it tokenized differently says nothing
      try {
        router.observeCachedTokens(
            worker, tokens, options, (int) Math.min(Integer.MAX_VALUE, predicted), reported);
      } catch (IllegalStateException e) {
        // the rank left and came back fed by events meanwhile: its events keep it
      }
    }
    long expected = expected(predicted, u.promptTokens, granule);
    int outcome = outcome(reported, expected, model.blockSize());
    model.accuracy(worker).record(expected, reported, outcome, u.promptTokens);
    metrics.prediction.error.labelValues(model.modelName(), engine).observe(reported - expected);
    metrics
        .prediction
        .outcomes
        .labelValues(
            model.modelName(),
            engine,
            outcome == 0 ? "exact" : outcome < 0 ? "engine_fewer" : "engine_more")
        .inc();
    Window w = windows.computeIfAbsent(key, k -> new Window());
    String warning =
        w.add(
            outcome,
            promptMismatch,
            predictedRank,
            System.nanoTime(),
            warnNanos,
            model.modelName(),
            engine,
            baseUrl,
            expected,
            reported,
            u.promptTokens,
            gatewayPromptTokens);
    if (warning != null) LOG.log(Level.WARNING, warning);
  }

  /** The last outcomes of one (model, engine). */
  private static final class Window {
    private final byte[] outcomes = new byte[WINDOW]; // -1 fewer, 0 exact, 1 more
    private final boolean[] mismatch = new boolean[WINDOW];
    private int next;
    private int size;
    private long lastFewerWarn;
    private long lastMoreWarn;
    private boolean warnedFewer;
    private boolean warnedMore;

    synchronized String add(
        int outcome,
        boolean promptMismatch,
        boolean predictedRank,
        long now,
        long warnNanos,
        String model,
        String engine,
        String baseUrl,
        long expected,
        long reported,
        long enginePrompt,
        int gatewayPrompt) {
      outcomes[next] = (byte) outcome;
      mismatch[next] = promptMismatch;
      next = (next + 1) % WINDOW;
      if (size < WINDOW) size++;
      if (size < MIN_SAMPLES) return null;
      int fewer = 0;
      int more = 0;
      int mismatches = 0;
      for (int i = 0; i < size; i++) {
        if (outcomes[i] < 0) fewer++;
        else if (outcomes[i] > 0) more++;
        if (mismatch[i]) mismatches++;
      }
      String head =
          "kvrouter gateway: engine "
              + engine
              + " ("
              + baseUrl
              + ") of model '"
              + model
              + "' reported ";
      String tail =
          " in "
              + (outcome < 0 ? fewer : more)
              + " of its last "
              + size
              + " requests (last: router expected "
              + expected
              + " cached tokens, engine reported "
              + reported
              + "; prompt_tokens engine "
              + enginePrompt
              + ", gateway "
              + gatewayPrompt
              + (mismatches > 0
                  ? "; " + mismatches + " of them with prompt_tokens differing from the gateway's"
                  : "")
              + ")";
      if (outcome < 0 && fewer * 2 >= size && (!warnedFewer || now - lastFewerWarn >= warnNanos)) {
        warnedFewer = true;
        lastFewerWarn = now;
        return head
            + "FEWER cached tokens than the router predicted"
            + tail
            + (predictedRank
                ? ": the engine is tracked by predictions and keeps less than the capacity the"
                    + " router models (a llama.cpp slot keeps only its last prompt; its host"
                    + " prompt cache is off, --cache-ram 0): the reports shrink the model, and"
                    + " predictions of what other traffic evicted are wrong meanwhile"
                : ": the router's index holds blocks the engine no longer has (lost removal"
                    + " events, an engine restarted without the router noticing) or the engine's"
                    + " cache is smaller than registered; check its ZMQ ingestion in GET"
                    + " /workers");
      }
      if (outcome > 0 && more * 2 >= size && (!warnedMore || now - lastMoreWarn >= warnNanos)) {
        warnedMore = true;
        lastMoreWarn = now;
        return head
            + "MORE cached tokens than the router predicted"
            + tail
            + (mismatches > 0
                ? ": the gateway tokenizes differently from the engine (tokenizer files or chat"
                    + " template differ: check with ./kvrouter tokenizer check)"
                : predictedRank
                    ? ": the engine is tracked by predictions (no KV events) and keeps prefixes the"
                        + " router does not predict (an earlier answer's tokens in the prompt, a"
                        + " cache larger than its reported capacity), or the gateway's tokenizer"
                        + " or chat template differs from the engine's (./kvrouter tokenizer"
                        + " check)"
                    : ": the router misses the engine's KV events (not registered with an"
                        + " endpoint, or events lost), or the gateway's tokenizer or chat"
                        + " template differs from the engine's (./kvrouter tokenizer check)");
      }
      return null;
    }
  }
}
