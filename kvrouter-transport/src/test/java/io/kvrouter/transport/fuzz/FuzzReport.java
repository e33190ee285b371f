package io.kvrouter.transport.fuzz;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.index.IndexStats;
import io.kvrouter.index.KvIndex;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/**
 * What one fuzz run saw (test support): inputs by outcome, index dumps compared, time taken, and
 * the first failures with the input that caused each (as hex, abbreviated), so a failing run can be
 * reproduced from its seed and input number.
 */
public final class FuzzReport {
  private static final int MAX_FAILURES = 20;

  private final String decoder;
  private final long seed;
  private final long startNanos = System.nanoTime();
  private long durationNanos = -1;
  private long rejects;
  private long accepted;
  private long dropped;
  private long dumps;
  private long crashes;
  private long failureCount;
  private final List<String> failures = new ArrayList<>();

  public FuzzReport(String decoder, long seed) {
    this.decoder = decoder;
    this.seed = seed;
  }

  public void reject() {
    rejects++;
  }

  public void accept() {
    accepted++;
  }

  /** Decoded, then dropped whole by a later stage (it changed nothing either). */
  public void dropped() {
    dropped++;
  }

  public void dumpCompared() {
    dumps++;
  }

  /**
   * Checks that rejecting input {@code i} left {@code index} as it was: its stats, and its dump
   * when {@code dumpBefore} is not null (a dump comparison, counted).
   */
  public void indexUnchanged(
      long i, byte[] input, KvIndex index, IndexStats statsBefore, List<RouterEvent> dumpBefore) {
    if (!index.stats().equals(statsBefore)) {
      failure(i, input, "a reject changed the index: " + statsBefore, null);
    }
    if (dumpBefore != null) {
      dumpCompared();
      if (!index.dump().equals(dumpBefore)) {
        failure(i, input, "a reject changed the index dump", null);
      }
    }
  }

  /** Records a failure of input {@code i} (-1: a check of totals). */
  public void failure(long i, byte[] input, String what, Throwable t) {
    failureCount++;
    if (failures.size() < MAX_FAILURES) {
      String hex = HexFormat.of().formatHex(input, 0, Math.min(input.length, 256));
      failures.add(
          "input "
              + i
              + " ("
              + input.length
              + " bytes"
              + (input.length > 256 ? ", first 256" : "")
              + ": "
              + hex
              + "): "
              + what
              + (t == null ? "" : " at " + stackTop(t)));
    }
  }

  private static String stackTop(Throwable t) {
    StackTraceElement[] st = t.getStackTrace();
    return st.length == 0 ? "?" : st[0].toString();
  }

  public void finish() {
    durationNanos = System.nanoTime() - startNanos;
  }

  /** Records input {@code i} as one that threw something other than the reject exception. */
  public void crashed(long i, byte[] input, String what, Throwable t) {
    crashes++;
    failure(i, input, what, t);
  }

  public long inputs() {
    return rejects + accepted + dropped + crashes;
  }

  /** Inputs that threw something other than the reject exception. */
  public long crashes() {
    return crashes;
  }

  public long rejects() {
    return rejects;
  }

  public long accepted() {
    return accepted + dropped;
  }

  public List<String> failures() {
    return failures;
  }

  public String summary() {
    long ms = (durationNanos < 0 ? System.nanoTime() - startNanos : durationNanos) / 1_000_000;
    return String.format(
        "FUZZ %s: seed %d, inputs %d, rejected %d, accepted %d (of which dropped whole %d),"
            + " dumps compared %d, exceptions %d, failures %d, %.1f s",
        decoder,
        seed,
        inputs(),
        rejects,
        accepted + dropped,
        dropped,
        dumps,
        crashes,
        failureCount,
        ms / 1000.0);
  }
}
