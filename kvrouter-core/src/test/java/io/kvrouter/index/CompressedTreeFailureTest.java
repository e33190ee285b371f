package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A write of the compressed tree that fails while it settles the nodes it touched (a bug, or an
 * error the JVM throws there) leaves the writers' lock free and hands none of those nodes to the
 * next write: every later write still runs, and the index still answers.
 */
class CompressedTreeFailureTest {
  private static final Worker W1 = Worker.of(1);
  private static final Worker W2 = Worker.of(2);

  private static RouterEvent stored(Worker w, long id, long... locals) {
    return new RouterEvent(
        w, id, CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(locals), locals));
  }

  @ParameterizedTest
  @ValueSource(strings = {"clearWorker", "removeWorker"})
  void aFailedSettleLeavesTheLockFreeAndTheIndexWritable(String operation) {
    CompressedTreeIndex index = new CompressedTreeIndex(true);
    index.apply(stored(W1, 1, 10, 20, 30));
    index.apply(stored(W2, 2, 10, 20, 40)); // a run 10, 20 with children 30 (W1) and 40 (W2)
    // settling worker 1's own run (block 30, below the shared 10, 20) fails, every time: a
    // persistent fault, met by the clear; the next write does not touch that run
    index.settleFault =
        x -> {
          if (x.first == 30) throw new IllegalStateException("injected");
        };
    assertThatThrownBy(
            () -> {
              if (operation.equals("clearWorker")) index.clearWorker(1);
              else index.removeWorker(1);
            })
        .isInstanceOf(IllegalStateException.class)
        .hasMessage("injected");
    assertThat(index.writeLock.isLocked()).as("the writers' lock after the failure").isFalse();

    // the failed operation's nodes are not handed to the next write, which would fail on them too
    index.apply(stored(W2, 3, 10, 20, 40, 50));
    OverlapScores s = index.findMatches(new long[] {10, 20, 40, 50}, false);
    assertThat(s.scores()).containsEntry(W2, 4);
  }
}
