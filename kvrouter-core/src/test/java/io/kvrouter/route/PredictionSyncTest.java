package io.kvrouter.route;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import io.kvrouter.route.SequenceChange.Corrected;
import io.kvrouter.route.SequenceChange.Predicted;
import io.kvrouter.route.SequenceChange.Prediction;
import io.kvrouter.route.SequenceSync.Outcome;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/**
 * Approximate mode's predictions shared by sequence sync: replicas that apply each other's
 * predictions and corrections model the engines' caches exactly as one router that made every
 * decision and heard every report; duplicates apply once; a joiner's model from a snapshot equals
 * its peer's and stays equal under further traffic (the LRU order is carried, not only the blocks).
 */
class PredictionSyncTest {
  private static final int BS = 4;
  private static final long MS = 1_000_000L;
  private static final Worker[] WORKERS = {Worker.of(1), Worker.of(2), Worker.of(3)};
  private static final long[] KV_BLOCKS = {12, 20, 0}; // the last one unknown: learned

  private final AtomicLong clock = new AtomicLong(1_000 * MS);

  private KvRouter router() {
    KvRouter r =
        KvRouter.builder(BS)
            .approximate(Duration.ofMillis(400), 40)
            .requestExpiry(Duration.ofSeconds(1))
            .nanoClock(clock::get)
            .build();
    for (int i = 0; i < WORKERS.length; i++) {
      r.registerWorker(WORKERS[i].workerId(), 1, BS, KV_BLOCKS[i]);
    }
    return r;
  }

  /** A random prompt: one of 4 shared prefixes (0-3 blocks of it), then 0-4 own blocks. */
  private static int[] prompt(SplittableRandom rnd) {
    int group = rnd.nextInt(4);
    int shared = BS * rnd.nextInt(4);
    int own = BS * rnd.nextInt(5) + rnd.nextInt(BS);
    int[] t = new int[shared + own];
    for (int i = 0; i < shared; i++) t[i] = 1_000 * (group + 1) + i;
    for (int i = shared; i < t.length; i++) t[i] = rnd.nextInt(30); // small alphabet: repeats
    return t;
  }

  private record Batch(SequenceSync from, long first, List<SequenceChange> changes) {}

  private static Batch drain(SequenceSync s) {
    List<SequenceChange> out = new ArrayList<>();
    long first = s.drain(out);
    return new Batch(s, first, out);
  }

  private static Outcome deliver(Batch b, SequenceSync to) {
    return to.apply(b.from.replicaId(), b.from.incarnation(), b.first, b.changes);
  }

  /** Everything approximate mode predicts, as routing and the capacity model see it. */
  private static String model(KvRouter r, List<int[]> probes) {
    r.expire(); // a peer's apply expires: compare what is left, not what waits for expiry
    StringBuilder b = new StringBuilder();
    for (Worker w : WORKERS) {
      b.append(w)
          .append(": ")
          .append(r.predictedEntries(w))
          .append(" blocks, capacity ")
          .append(r.predictedCapacity(w))
          .append('\n');
    }
    for (int[] p : probes) {
      b.append(new TreeMap<>(r.overlaps(p, RouteOptions.defaults()).scores())).append('\n');
    }
    return b.toString();
  }

  private record Sent(Worker worker, int[] tokens, int predictedTokens) {}

  /** One random step on {@code on} and on the reference {@code one}, the same. */
  private void step(
      SplittableRandom rnd, KvRouter on, KvRouter one, List<Sent> sent, List<int[]> probes, int i) {
    int what = rnd.nextInt(10);
    if (what < 6) {
      int[] t = prompt(rnd);
      Worker w = WORKERS[rnd.nextInt(WORKERS.length)];
      RouteOptions o = RouteOptions.defaults().withAllowedWorkers(w.workerId());
      var a = (RouteDecision.Routed) on.route("q" + i, t, o);
      var b = (RouteDecision.Routed) one.route("q" + i, t, o);
      assertThat(a.overlapTokens())
          .as("step %d: predicted overlap", i)
          .isEqualTo(b.overlapTokens());
      sent.add(new Sent(w, t, a.overlapTokens()));
      if (probes.size() < 40) probes.add(t);
      if (rnd.nextBoolean()) {
        on.free("q" + i);
        one.free("q" + i);
      }
    } else if (what < 9 && !sent.isEmpty()) {
      Sent s = sent.get(rnd.nextInt(sent.size()));
      long cached = rnd.nextInt(s.tokens.length + 1);
      on.observeCachedTokens(
          s.worker, s.tokens, RouteOptions.defaults(), s.predictedTokens, cached);
      one.observeCachedTokens(
          s.worker, s.tokens, RouteOptions.defaults(), s.predictedTokens, cached);
    } else {
      clock.addAndGet(MS * rnd.nextInt(150));
    }
  }

  @Test
  void threeSyncedReplicasPredictAsOneRouterThatSawEverything() {
    long seed = System.nanoTime();
    SplittableRandom rnd = new SplittableRandom(seed);
    KvRouter[] r = {router(), router(), router()};
    SequenceSync[] s = {r[0].sequenceSync("a"), r[1].sequenceSync("b"), r[2].sequenceSync("c")};
    KvRouter one = router();
    List<Sent> sent = new ArrayList<>();
    List<int[]> probes = new ArrayList<>();
    List<Batch> old = new ArrayList<>();
    long predictionsSent = 0;
    for (int i = 0; i < 600; i++) {
      int at = rnd.nextInt(3);
      step(rnd, r[at], one, sent, probes, i);
      Batch b = drain(s[at]);
      for (SequenceChange c : b.changes) if (c instanceof Prediction) predictionsSent++;
      for (int k = 0; k < 3; k++) {
        Outcome o = deliver(b, s[k]);
        if (k == at) assertThat(o).isEqualTo(Outcome.OWN);
        else assertThat(o).as("seed %d step %d", seed, i).isNotEqualTo(Outcome.NEEDS_SNAPSHOT);
      }
      old.add(b);
      if (rnd.nextInt(8) == 0) { // an old batch again: must change nothing
        Batch again = old.get(rnd.nextInt(old.size()));
        for (SequenceSync x : s) deliver(again, x);
      }
      String expected = model(one, probes);
      for (int k = 0; k < 3; k++) {
        assertThat(model(r[k], probes))
            .as("seed %d step %d replica %d", seed, i, k)
            .isEqualTo(expected);
      }
    }
    // the run did exercise what it claims: evictions, corrections, learned capacities
    long received = 0;
    for (SequenceSync x : s) received += x.stats().peerPredictionsApplied();
    assertThat(received).as("seed %d", seed).isEqualTo(2 * predictionsSent);
    assertThat(predictionsSent).isGreaterThan(300);
    assertThat(one.predictedCapacity(WORKERS[2])).as("seed %d", seed).isLessThan(Long.MAX_VALUE);
  }

  @Test
  void aDuplicatedCorrectionIsAppliedOnce() {
    KvRouter a = router();
    KvRouter b = router();
    SequenceSync sa = a.sequenceSync("a");
    SequenceSync sb = b.sequenceSync("b");
    int[] t = IntStream.range(0, 4 * BS + 1).toArray();
    RouteOptions o = RouteOptions.defaults().withAllowedWorkers(1);
    a.route("r", t, o);
    a.observeCachedTokens(WORKERS[0], t, RouteOptions.defaults(), 4 * BS, BS); // denies 3 blocks
    Batch batch = drain(sa);
    assertThat(batch.changes).hasAtLeastOneElementOfType(Predicted.class);
    assertThat(batch.changes).hasAtLeastOneElementOfType(Corrected.class);
    assertThat(deliver(batch, sb)).isEqualTo(Outcome.APPLIED);
    assertThat(b.predictedCapacity(WORKERS[0])).isEqualTo(12 - 3);
    assertThat(deliver(batch, sb)).isEqualTo(Outcome.DUPLICATE);
    assertThat(b.predictedCapacity(WORKERS[0])).isEqualTo(12 - 3); // not 6
    assertThat(b.predictedEntries(WORKERS[0])).isEqualTo(a.predictedEntries(WORKERS[0]));
    assertThat(sb.stats().peerPredictionsApplied()).isEqualTo(2);
    // a lost prediction is counted as a gap and the next one applied all the same
    a.route("r2", IntStream.range(500, 508).toArray(), o);
    drain(sa); // lost
    a.route("r3", IntStream.range(600, 608).toArray(), o);
    Batch after = drain(sa);
    // the load changes of the lost batch are a gap too: nothing until a snapshot
    assertThat(deliver(after, sb)).isEqualTo(Outcome.NEEDS_SNAPSHOT);
    sb.load("a", sa.incarnation(), sa.snapshot());
    assertThat(deliver(after, sb)).isEqualTo(Outcome.DUPLICATE); // all in the snapshot
    assertThat(model(b, List.of(t))).isEqualTo(model(a, List.of(t)));
  }

  @Test
  void aJoinerTakesThePeersModelFromItsSnapshotAndStaysInStep() {
    long seed = System.nanoTime();
    SplittableRandom rnd = new SplittableRandom(seed);
    KvRouter a = router();
    SequenceSync sa = a.sequenceSync("a");
    KvRouter one = router(); // a's twin, for step()'s second router
    List<Sent> sent = new ArrayList<>();
    List<int[]> probes = new ArrayList<>();
    int joinAt = 100 + rnd.nextInt(100);
    KvRouter c = null;
    SequenceSync sc = null;
    for (int i = 0; i < 400; i++) {
      step(rnd, a, one, sent, probes, i);
      Batch b = drain(sa);
      if (i == joinAt) {
        c = router();
        sc = c.sequenceSync("c");
        assertThat(deliver(b, sc)).isEqualTo(Outcome.NEEDS_SNAPSHOT); // unknown past 1
        SequenceSync.Snapshot snap = sa.snapshot();
        assertThat(snap.predictions()).as("seed %d", seed).isNotEmpty();
        sc.load("a", sa.incarnation(), snap);
        deliver(b, sc); // in the snapshot already: skipped
      } else if (sc != null) {
        assertThat(deliver(b, sc)).isNotEqualTo(Outcome.NEEDS_SNAPSHOT);
      }
      if (c != null) {
        assertThat(model(c, probes)).as("seed %d step %d", seed, i).isEqualTo(model(a, probes));
      }
    }
  }
}
