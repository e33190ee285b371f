package io.kvrouter.sim;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.mockengine.EventLoop;
import io.kvrouter.mockengine.TimingModel;
import io.kvrouter.sim.trace.TraceRequest;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** {@link MockEngine} and {@link TimingModel} on hand-computed examples. */
class MockEngineTest {
  private static final long MS = 1_000_000L;

  /** Prefill 1 ms + 1 ms per token, decode 10 ms per token after the first. */
  private static TimingModel timing(int maxBatch) {
    return new TimingModel(1, 1000, 10, maxBatch);
  }

  private final EventLoop loop = new EventLoop();
  private final List<String> log = new ArrayList<>();
  private final List<Long> eventTimes = new ArrayList<>();
  private final List<RouterEvent> events = new ArrayList<>();

  private MockEngine engine(int maxBatch, int gpuBlocks) {
    return new MockEngine(
        3,
        1,
        4,
        gpuBlocks,
        timing(maxBatch),
        loop,
        RemovedEvents.PER_EVICTION,
        e -> {
          events.add(e);
          eventTimes.add(loop.now());
        },
        new MockEngine.Listener() {
          @Override
          public void firstToken(SimRequest r) {
            log.add(r.id + " first " + loop.now() / MS + " ttft " + r.ttftNanos() / MS);
          }

          @Override
          public void finished(SimRequest r) {
            log.add(r.id + " done " + loop.now() / MS + " cached " + r.cachedTokens);
          }

          @Override
          public void rejected(SimRequest r) {
            log.add(r.id + " rejected " + loop.now() / MS);
          }
        });
  }

  private void submitAt(MockEngine e, long ms, long id, int input, int output, long hashId) {
    SimRequest r =
        new SimRequest(id, new TraceRequest(1, ms, input, output, new long[] {hashId}), ms * MS);
    loop.at(ms * MS, () -> e.submit(r, 0));
  }

  @Test
  void timingModelFormulas() {
    TimingModel t = new TimingModel(5, 50, 20, 8);
    assertThat(t.prefillNanos(2000)).isEqualTo(105 * MS); // 5 + 2 x 50
    assertThat(t.prefillNanos(0)).isEqualTo(5 * MS);
    assertThat(t.decodeNanos(11)).isEqualTo(200 * MS); // 10 tokens after the first
    assertThat(t.decodeNanos(1)).isZero();
    assertThat(t.decodeNanos(0)).isZero();
  }

  @Test
  void batchOfOneQueuesFifoAndReusesTheCachedPrefix() {
    MockEngine e = engine(1, 100);
    submitAt(e, 0, 1, 8, 3, 5); // 2 blocks of id 5
    submitAt(e, 1, 2, 12, 1, 5); // the same 8 tokens + 4 more: 2 blocks cached
    submitAt(e, 2, 3, 4, 1, 7); // another prefix
    loop.run();
    assertThat(log)
        .containsExactly(
            "1 first 9 ttft 9", // admitted at 0, prefill 1 + 8 = 9 ms
            "1 done 29 cached 0", // decode 2 x 10 ms
            "2 first 34 ttft 33", // waits for the slot until 29, prefill 1 + 4 (8 cached)
            "2 done 34 cached 8",
            "3 first 39 ttft 37", // admitted at 34, prefill 1 + 4
            "3 done 39 cached 0");
    // blocks are stored (and published) at admission: 0, 29 and 34 ms
    assertThat(eventTimes).containsExactly(0L, 29 * MS, 34 * MS);
    assertThat(events).allMatch(ev -> ev.data() instanceof CacheEvent.Stored);
  }

  @Test
  void aBiggerBatchSharesTheSerialPrefillLane() {
    MockEngine e = engine(2, 100);
    submitAt(e, 0, 1, 8, 3, 5);
    submitAt(e, 1, 2, 12, 1, 5);
    submitAt(e, 2, 3, 4, 1, 7);
    loop.run();
    assertThat(log)
        .containsExactly(
            "1 first 9 ttft 9",
            "2 first 14 ttft 13", // admitted at 1 (hits A's blocks), prefill lane free at 9
            "2 done 14 cached 8",
            "3 first 19 ttft 17", // slot free at 14
            "3 done 19 cached 0",
            "1 done 29 cached 0");
  }

  @Test
  void aFullPoolMakesTheQueueWaitAndEvictsWhenItCan() {
    MockEngine e = engine(4, 3); // three blocks of 4 tokens
    submitAt(e, 0, 1, 8, 2, 5); // 2 blocks, held until 9 + 10 = 19
    submitAt(e, 0, 2, 8, 1, 6); // 2 more blocks: only 1 free, the rest locked -> waits
    submitAt(e, 0, 3, 20, 1, 8); // 5 blocks > 3: can never fit, rejected at once
    loop.run();
    assertThat(log)
        .containsExactly(
            "3 rejected 0",
            "1 first 9 ttft 9",
            "1 done 19 cached 0",
            "2 first 28 ttft 28", // admitted at 19 after evicting one of request 1's blocks
            "2 done 28 cached 0");
    assertThat(events.get(1).data()).isInstanceOf(CacheEvent.Removed.class);
    assertThat(events.get(2).data()).isInstanceOf(CacheEvent.Stored.class);
    assertThat(eventTimes.subList(1, 3)).containsExactly(19 * MS, 19 * MS);
  }

  @Test
  void loadIsIntegratedOverTime() {
    MockEngine e = engine(1, 100);
    submitAt(e, 0, 1, 8, 3, 5); // in flight 0..29
    submitAt(e, 1, 2, 12, 1, 5); // in flight 1..34
    loop.run();
    // 29 + 33 request-ms over 34 ms
    assertThat(e.rank(0).loadIntegral(34 * MS) / MS).isEqualTo(62.0);
    assertThat(e.rank(0).prefillBusyNanos()).isEqualTo(14 * MS);
  }

  @Test
  void abortFreesTheSlotMovesTheLaneUpAndDropsTheBlocksItStored() {
    MockEngine e = engine(8, 100);
    SimRequest[] r = new SimRequest[4];
    for (int i = 1; i <= 3; i++) {
      r[i] = new SimRequest(i, new TraceRequest(1, 0, 8, 1, new long[] {10 + i}), 0);
      SimRequest x = r[i];
      loop.at(0, () -> e.submit(x, 0));
    }
    // prefills of 9 ms each on one lane: r1 0..9, r2 9..18, r3 18..27
    long[] wasted = new long[3];
    loop.at(
        4 * MS,
        () -> {
          wasted[0] = e.abort(r[2], 0); // not started: nothing computed; r3 moves to 9..18
          wasted[1] = e.abort(r[1], 0); // 4 of its 9 ms done; r3 moves to 4..13
          wasted[2] = e.abort(r[1], 0); // once
        });
    loop.run();
    assertThat(wasted).containsExactly(0, Math.round(8 * 4 / 9.0), -1);
    assertThat(log).containsExactly("3 first 13 ttft 13", "3 done 13 cached 0");
    assertThat(e.abort(r[3], 0)).isEqualTo(-1); // finished: nothing to abort
    assertThat(e.rank(0).inFlight()).isZero();
    // the aborted requests' blocks were stored at admission and are gone again; r3's stay
    assertThat(e.rank(0).cache.lookup(r[1].tokens())).isZero();
    assertThat(e.rank(0).cache.lookup(r[2].tokens())).isZero();
    assertThat(e.rank(0).cache.lookup(r[3].tokens())).isEqualTo(2);
    assertThat(e.rank(0).cache.cachedBlocks()).isEqualTo(2);
    long removed = events.stream().filter(x -> x.data() instanceof CacheEvent.Removed).count();
    assertThat(removed).isEqualTo(2);
    // the lane's busy time counts only what ran: r1's 4 ms and r3's 9 ms
    assertThat(e.rank(0).prefillBusyNanos()).isEqualTo(13 * MS);
  }
}
