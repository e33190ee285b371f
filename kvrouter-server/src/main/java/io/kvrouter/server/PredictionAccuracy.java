package io.kvrouter.server;

import com.fasterxml.jackson.core.JsonGenerator;
import java.io.IOException;
import java.util.concurrent.atomic.LongAdder;

/**
 * How well the router's predicted prefix overlap for one worker rank matched what its engine
 * reported it served from its cache ({@code usage.prompt_tokens_details.cached_tokens}), counted by
 * the gateway (io.kvrouter.gateway) and shown per rank in {@code GET /workers} as {@code
 * "prediction"}.
 *
 * <pre>
 * Implementation notes
 *
 * Counters only (LongAdder: many request threads add, /workers reads); the caller decides what
 * "expected" means (the gateway caps the prediction by what an engine can report, see
 * docs/gateway.md) and passes both numbers. Reads are not a snapshot: a /workers answer written
 * while requests complete may count a comparison in compared() and not yet in exact(). One per
 * (index, rank), made on first use by ModelIndex.accuracy and dropped with its index.
 * </pre>
 */
public final class PredictionAccuracy {
  private final LongAdder compared = new LongAdder();
  private final LongAdder exact = new LongAdder();
  private final LongAdder fewer = new LongAdder();
  private final LongAdder more = new LongAdder();
  private final LongAdder expectedTokens = new LongAdder();
  private final LongAdder reportedTokens = new LongAdder();
  private final LongAdder absErrorTokens = new LongAdder();
  private final LongAdder promptTokens = new LongAdder();

  PredictionAccuracy() {}

  /**
   * Counts one request: the engine reported {@code reported} cached prompt tokens where the router
   * expected {@code expected}.
   */
  public void record(long expected, long reported) {
    record(expected, reported, Long.compare(reported, expected));
  }

  /**
   * Counts one request whose outcome the caller judged at the engine's granularity: {@code outcome}
   * -1 the engine had fewer cached tokens than expected, 0 as many, 1 more.
   */
  public void record(long expected, long reported, int outcome) {
    record(expected, reported, outcome, 0);
  }

  /**
   * Counts one request as {@link #record(long, long, int)} does, with the prompt tokens the engine
   * counted (for the hit rate of {@code GET /dashboard}: reported cached tokens over prompt
   * tokens).
   */
  public void record(long expected, long reported, int outcome, long promptTokens) {
    this.promptTokens.add(promptTokens);
    compared.increment();
    expectedTokens.add(expected);
    reportedTokens.add(reported);
    absErrorTokens.add(Math.abs(reported - expected));
    if (outcome == 0) {
      exact.increment();
    } else if (outcome < 0) {
      fewer.increment();
    } else {
      more.increment();
    }
  }

  /** Requests compared. */
  public long compared() {
    return compared.sum();
  }

  /** Requests whose engine reported exactly the expected cached tokens. */
  public long exact() {
    return exact.sum();
  }

  /** Requests whose engine reported fewer cached tokens than expected. */
  public long fewer() {
    return fewer.sum();
  }

  /** Requests whose engine reported more cached tokens than expected. */
  public long more() {
    return more.sum();
  }

  /** Sum of the expected cached tokens. */
  public long expectedTokens() {
    return expectedTokens.sum();
  }

  /** Sum of the reported cached tokens. */
  public long reportedTokens() {
    return reportedTokens.sum();
  }

  /** Sum of the prompt tokens of the compared requests (0 for those recorded without them). */
  public long promptTokens() {
    return promptTokens.sum();
  }

  /** Fraction of compared requests that were exact; 1 when none was compared. */
  public double accuracy() {
    long n = compared();
    return n == 0 ? 1.0 : (double) exact() / n;
  }

  /** {@code "prediction": {...}} for /workers. */
  void write(JsonGenerator g) throws IOException {
    long n = compared();
    g.writeObjectFieldStart("prediction");
    g.writeNumberField("compared", n);
    g.writeNumberField("exact", exact());
    g.writeNumberField("engine_fewer", fewer());
    g.writeNumberField("engine_more", more());
    g.writeNumberField("accuracy", accuracy());
    g.writeNumberField("expected_tokens", expectedTokens());
    g.writeNumberField("reported_tokens", reportedTokens());
    g.writeNumberField("mean_abs_error_tokens", n == 0 ? 0.0 : (double) absErrorTokens.sum() / n);
    g.writeEndObject();
  }
}
