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

/** A simulated rank's host tier on a hand-computed example (docs/SIMULATION.md, "A host tier"). */
class HostTierTest {
  private static final long MS = 1_000_000L;

  private final EventLoop loop = new EventLoop();
  private final List<String> log = new ArrayList<>();
  private final List<RouterEvent> device = new ArrayList<>();
  private final List<RouterEvent> host = new ArrayList<>();

  /** 2 device blocks of 4 tokens, 4 host blocks loaded at 0.5 ms each; prefill 1 ms + 1/token. */
  private MockEngine engine() {
    return new MockEngine(
        3,
        1,
        4,
        2,
        new TimingModel(1, 1000, 10, 1),
        loop,
        RemovedEvents.PER_EVICTION,
        device::add,
        new MockEngine.Listener() {
          @Override
          @SuppressWarnings("NarrowCalculation") // whole tenths of a millisecond, on purpose
          public void firstToken(SimRequest r) {
            log.add(r.id + " ttft " + r.ttftNanos() / (MS / 10) / 10.0);
          }

          @Override
          public void finished(SimRequest r) {
            log.add(r.id + " cached " + r.cachedTokens + " host " + r.hostTokens);
          }

          @Override
          public void rejected(SimRequest r) {
            log.add(r.id + " rejected");
          }
        },
        4,
        MS / 2,
        host::add);
  }

  private void submitAt(MockEngine e, long ms, long id, long hashId) {
    SimRequest r = new SimRequest(id, new TraceRequest(1, ms, 8, 1, new long[] {hashId}), ms * MS);
    loop.at(ms * MS, () -> e.submit(r, 0));
  }

  @Test
  void evictedBlocksMoveToTheHostAndAreLoadedBackAtTheTransferCost() {
    MockEngine e = engine();
    submitAt(e, 0, 1, 5); // 2 blocks of prompt 5 fill the device
    submitAt(e, 100, 2, 7); // prompt 7 evicts them: they go to the host
    submitAt(e, 200, 3, 5); // prompt 5 again: both blocks from the host
    submitAt(e, 300, 4, 9); // prompt 9: evicts prompt 5 from the device, fills the host (LRU)
    loop.run();
    assertThat(log)
        .containsExactly(
            "1 ttft 9.0", // 1 + 8
            "1 cached 0 host 0",
            "2 ttft 9.0",
            "2 cached 0 host 0",
            "3 ttft 2.0", // 1 + 0 tokens recomputed + 2 x 0.5 ms of transfer
            "3 cached 8 host 8",
            "4 ttft 9.0",
            "4 cached 0 host 0");
    // the host stored prompt 5's two blocks when prompt 7 evicted them, then prompt 7's when
    // prompt 5 came back (4 fit: nothing left the host), each under its parent or at the root
    assertThat(host.subList(0, 4)).allMatch(ev -> ev.data() instanceof CacheEvent.Stored);
    assertThat(host.subList(0, 2))
        .filteredOn(ev -> !((CacheEvent.Stored) ev.data()).hasParent())
        .hasSize(1);
    // prompt 9 evicted prompt 5 from the device again: its host copies were touched by the hit,
    // so the host drops prompt 7's (the least recently used) to make room for nothing new
    // (prompt 5's copies are already there)
    assertThat(host).hasSize(4);
    assertThat(device).filteredOn(ev -> ev.data() instanceof CacheEvent.Removed).hasSize(3);
  }
}
